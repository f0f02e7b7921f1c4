// Importing an OpenClaw state database from a gateway: the copy runs in a child process
// (`session-awareness import --json`), never in the gateway's own, because the gateway keeps
// its openclaw.sqlite open through another SQLite library and two libraries in one process
// lose each other's locks.
import { spawn } from 'node:child_process'
import * as path from 'node:path'

import * as native from '../index.js'
import * as a from './args'
import { fromNative } from './errors'

/** What happened to one table's source rows: `read = inserted + updated + present + skipped`. */
export interface ImportTableSummary {
  /** Rows read from the source. */
  read: number
  /** Rows written that the destination did not have. */
  inserted: number
  /** Heads the destination had, raised to the source's values. */
  updated: number
  /** Rows the destination already had (events: or had pruned); left as they are. */
  present: number
  /** Rows the store's tables cannot hold, and ambient-group sentinel rows of old files. */
  skipped: number
}

/** The outcome of an import, as `session-awareness import --json` prints it. */
export interface ImportSummary {
  /** `session_state_events`. */
  events: ImportTableSummary
  /** `session_state_heads`. */
  heads: ImportTableSummary
  /** `session_watch_cursors`. */
  cursors: ImportTableSummary
  /** `session_upstream_links`. */
  upstreamLinks: ImportTableSummary
  /** The source's largest sequence ever given; the destination numbers after it. */
  sourceLastSequence: number
  /** The source was read through its `-wal` file (a gateway had it open). */
  sourceWal: boolean
}

/** A progress report: `done` of the `total` source rows of `table` have been handled. */
export interface ImportProgress {
  /** The table being copied, e.g. `session_state_events`. */
  table: string
  /** Source rows handled so far. */
  done: number
  /** Source rows of the table. */
  total: number
}

/** Options of {@link importOpenClawState}. */
export interface ImportOpenClawStateOptions {
  /**
   * Receives the child's progress reports (tables of at least 10,000 rows, every 10,000 rows
   * and at the end of the table).
   */
  onProgress?: (progress: ImportProgress) => void
  /** Kills the child; the promise rejects with code `ABORT_ERR`. Committed batches stay. */
  signal?: AbortSignal
  /** The Node.js binary that runs the command. Default: `process.execPath`. */
  execPath?: string
  /** The command-line script. Default: the package's `bin/session-awareness.js`. */
  cliPath?: string
}

/** A failed import: `code` is the command's error code (`ERR_IMPORT_DIVERGED`, `ERR_DB`, …). */
export interface ImportError extends Error {
  /** The stable error code. */
  code: string
  /** The child's exit status, or null when a signal ended it. */
  exitCode: number | null
}

/** The command-line script of this package. */
const DEFAULT_CLI = path.join(__dirname, '..', 'bin', 'session-awareness.js')

function importError(code: string, message: string, exitCode: number | null): ImportError {
  return Object.assign(new Error(message), { code, exitCode })
}

/**
 * Imports the session-state rows of the OpenClaw database at `source` into the store file at
 * `dest`, in a child process: resolves with the summary, or rejects with an
 * {@link ImportError} carrying the command's code (`ERR_IMPORT_DIVERGED` when the two
 * histories disagree: nothing was written). A second run adds only what is new.
 */
export function importOpenClawState(
  source: string,
  dest: string,
  options: ImportOpenClawStateOptions = {},
): Promise<ImportSummary> {
  return new Promise((resolve, reject) => {
    const args = [options.cliPath ?? DEFAULT_CLI, 'import', '--json', '--', source, dest]
    const child = spawn(options.execPath ?? process.execPath, args, {
      stdio: ['ignore', 'pipe', 'pipe'],
      signal: options.signal,
    })
    let stdout = ''
    let pending = ''
    let failure: { code: string; message: string } | undefined
    const other: string[] = []
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk
    })
    const line = (text: string) => {
      let parsed: unknown
      try {
        parsed = JSON.parse(text)
      } catch {
        if (text.trim() !== '') other.push(text)
        return
      }
      const msg = parsed as { progress?: ImportProgress; error?: { code: string; message: string } }
      if (msg.progress) options.onProgress?.(msg.progress)
      else if (msg.error) failure = msg.error
      else other.push(text)
    }
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      pending += chunk
      let nl: number
      while ((nl = pending.indexOf('\n')) !== -1) {
        line(pending.slice(0, nl))
        pending = pending.slice(nl + 1)
      }
    })
    child.on('error', (err: Error & { code?: string }) => {
      reject(importError(err.code ?? 'ERR_SPAWN', err.message, null))
    })
    child.on('close', (exitCode) => {
      if (pending !== '') line(pending)
      if (exitCode === 0) {
        try {
          resolve(JSON.parse(stdout) as ImportSummary)
        } catch {
          reject(importError('ERR_UNEXPECTED', `import printed no summary: ${stdout}`, exitCode))
        }
      } else if (failure) {
        reject(importError(failure.code, failure.message, exitCode))
      } else if (!options.signal?.aborted) {
        const detail = other.join('\n') || `exit status ${exitCode}`
        reject(importError('ERR_UNEXPECTED', `import failed: ${detail}`, exitCode))
      }
    })
  })
}

/**
 * Runs the import in this process, through the addon: what `session-awareness import` calls.
 * Never call it inside a gateway that has either file open through another SQLite library
 * (use {@link importOpenClawState}, which runs it in a child process). Throws a
 * `SessionStateError`: `ERR_IMPORT_DIVERGED`, `ERR_INVALID_ARG`, `ERR_NOT_SQLITE`,
 * `ERR_DB`, `ERR_FOREIGN_SCHEMA`, or `ERR_PROGRESS_CALLBACK` after the import finished when
 * `onProgress` threw.
 */
export function importStateDatabase(
  source: string,
  dest: string,
  options?: native.ImportDatabaseOptions | null,
): native.ImportSummary {
  a.str(source, 'source')
  a.str(dest, 'dest')
  try {
    return native.importStateDatabase(source, dest, options)
  } catch (e) {
    throw fromNative(e)
  }
}
