// Shared pieces of the reliability suite: temp dirs, a raw SQLite view of the file, a seeded
// PRNG, child processes that speak in lines, and the figures each test measures.
import { spawn, type ChildProcess } from 'node:child_process'
import * as fs from 'node:fs'
import * as os from 'node:os'
import * as path from 'node:path'

export const ROOT = path.resolve(__dirname, '..', '..')
export const FIXTURES = path.join(ROOT, '__test__', 'fixtures')

/** A coded error as thrown or passed to `onError`. */
export type CodedError = Error & { code: string; during?: string }

/** A fresh temp dir; the caller removes it. */
export function tempDir(prefix: string): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), `sa-rel-${prefix}-`))
}

/** The few better-sqlite3 calls the suite uses (no type package is installed for it). */
export interface RawDb {
  prepare(sql: string): {
    run(...params: unknown[]): { changes: number }
    get(...params: unknown[]): Record<string, unknown> | undefined
    all(...params: unknown[]): Array<Record<string, unknown>>
  }
  exec(sql: string): void
  pragma(sql: string, options?: { simple: boolean }): unknown
  close(): void
}

/**
 * A better-sqlite3 handle on `file`, for looking behind the API. Only while no store of this
 * process has the file open: better-sqlite3 is a second copy of SQLite, and two copies in one
 * process break each other's locks (use `Snapshots` instead).
 */
export function rawDb(file: string, options: { readonly?: boolean; timeout?: number } = {}): RawDb {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const Database = require('better-sqlite3')
  return new Database(file, { fileMustExist: true, timeout: 30_000, ...options }) as RawDb
}

/** Runs `fn` on a raw handle of `file` and closes it. */
export function withRaw<T>(file: string, fn: (db: RawDb) => T, options: { readonly?: boolean } = {}): T {
  const db = rawDb(file, options)
  try {
    return fn(db)
  } finally {
    db.close()
  }
}

/** mulberry32: a small seedable PRNG in [0, 1). */
export function prng(seed: number): () => number {
  let s = seed >>> 0
  return () => {
    s = (s + 0x6d2b79f5) >>> 0
    let t = s
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/** The seed of a randomised test: `SA_SEED` when set (to replay a failure), else fresh. */
export function seedFromEnv(): number {
  const fromEnv = process.env.SA_SEED
  return fromEnv !== undefined ? Number(fromEnv) >>> 0 : (Date.now() ^ (process.pid << 16)) >>> 0
}

/** A child process whose stdout is read as complete lines. */
export interface LineChild {
  proc: ChildProcess
  /** Complete lines received so far (a partial last line is not included). */
  lines: string[]
  /** Everything written to stderr. */
  stderr(): string
  /** Resolves with the exit code and signal once the child has exited. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
  /** Resolves once a line satisfying `pred` arrived (rejects if the child exits first). */
  waitLine(pred: (line: string, index: number) => boolean, timeoutMs?: number): Promise<string>
  /** Sends one line and resolves with the next line the child writes. */
  request(line: string): Promise<string>
  /** Writes one line to the child's stdin. */
  send(line: string): void
}

/**
 * Starts `node <fixture> ...args` with piped stdio; with `fileSizeLimitKiB`, under that
 * file-size limit (bash's `ulimit -f`, in KiB), which makes a full disk without privileges.
 */
export function startChild(fixture: string, args: string[], options: { fileSizeLimitKiB?: number } = {}): LineChild {
  const node = [process.execPath, path.join(FIXTURES, fixture), ...args]
  const [command, ...argv] =
    options.fileSizeLimitKiB === undefined
      ? node
      : ['bash', '-c', `ulimit -f ${options.fileSizeLimitKiB} && exec "$@"`, 'bash', ...node]
  const proc = spawn(command, argv, { stdio: ['pipe', 'pipe', 'pipe'] })
  const lines: string[] = []
  let partial = ''
  let err = ''
  const waiters: Array<{ pred: (l: string, i: number) => boolean; resolve: (l: string) => void }> = []
  proc.stdout!.setEncoding('utf8')
  proc.stdout!.on('data', (chunk: string) => {
    const parts = (partial + chunk).split('\n')
    partial = parts.pop()!
    for (const line of parts) {
      lines.push(line)
      for (let i = waiters.length - 1; i >= 0; i -= 1) {
        if (waiters[i].pred(line, lines.length - 1)) {
          waiters[i].resolve(line)
          waiters.splice(i, 1)
        }
      }
    }
  })
  proc.stderr!.setEncoding('utf8')
  proc.stderr!.on('data', (chunk: string) => {
    err += chunk
  })
  // stdin may be closed by a child that exits on its own; a late write must not crash us.
  proc.stdin!.on('error', () => {})
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    // 'close' fires after stdout is fully read, so `lines` is complete by then.
    proc.on('close', (code, signal) => resolve({ code, signal }))
  })
  const child: LineChild = {
    proc,
    lines,
    stderr: () => err,
    exited,
    waitLine(pred, timeoutMs = 60_000) {
      const seen = lines.find(pred)
      if (seen !== undefined) return Promise.resolve(seen)
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no matching line from ${fixture} in ${timeoutMs} ms`)), timeoutMs)
        waiters.push({
          pred,
          resolve: (l) => {
            clearTimeout(timer)
            resolve(l)
          },
        })
        exited.then(({ code, signal }) => {
          clearTimeout(timer)
          reject(new Error(`${fixture} exited (${code ?? signal}) before the line; stderr: ${err}`))
        })
      })
    },
    send(line: string) {
      proc.stdin!.write(`${line}\n`)
    },
    request(line: string) {
      const next = lines.length
      child.send(line)
      return child.waitLine((_l, i) => i >= next)
    },
  }
  return child
}

/**
 * Every row of the package's tables in a stable order, read by a helper process: equal
 * snapshots mean nothing stored changed. Safe while a store of this process has the file open.
 */
export class Snapshots {
  private server = startChild('snapshot-server.js', [])

  async take(file: string): Promise<string> {
    const reply = JSON.parse(await this.server.request(file)) as { ok?: string; error?: string }
    if (reply.ok === undefined) throw new Error(`snapshot of ${file} failed: ${reply.error}`)
    return reply.ok
  }

  async close(): Promise<void> {
    this.server.proc.stdin!.end()
    await this.server.exited
  }
}

/** Resolves after `ms` of real time. */
export function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

/** The `code` of the error `fn` throws; fails when it does not throw. */
export function codeOf(fn: () => unknown): string {
  try {
    fn()
  } catch (e) {
    return (e as CodedError).code
  }
  throw new Error('expected a throw')
}

/**
 * Keeps what a test measured: printed, and written to `.tmp/reliability/<name>.json` so the
 * figures quoted in RELIABILITY.md can be re-measured with one `npm test`.
 */
export function reportFigures(name: string, figures: Record<string, unknown>): void {
  const dir = path.join(ROOT, '.tmp', 'reliability')
  fs.mkdirSync(dir, { recursive: true })
  const body = { name, at: new Date().toISOString(), cpus: os.cpus().length, node: process.version, ...figures }
  fs.writeFileSync(path.join(dir, `${name}.json`), `${JSON.stringify(body, null, 2)}\n`)
  process.stdout.write(`reliability ${name}: ${JSON.stringify(figures)}\n`)
}
