// Shared fixtures of the Jest suite: a temp dir per test file, stores that are always closed,
// a controllable clock, and collectors for the onError and wake callbacks.
import * as childProcess from 'node:child_process'
import * as fs from 'node:fs'
import * as os from 'node:os'
import * as path from 'node:path'

import {
  SessionState,
  decodeNoticeContextKey,
  encodeNoticeContextKey,
  type SessionStateOptions,
  type WakeRequest,
} from '../lib'

export { SessionState, decodeNoticeContextKey, encodeNoticeContextKey }
export type { SessionStateOptions, WakeRequest }

export const SECOND = 1000
export const MINUTE = 60 * SECOND
export const HOUR = 60 * MINUTE
export const DAY = 24 * HOUR
/** The default retention: 30 days. */
export const RETENTION = 30 * DAY
/** A fixed start for clocked tests (2030-01-01T00:00:00Z), far from the system clock. */
export const T0 = Date.UTC(2030, 0, 1)

/** A coded error as `onError` receives it. */
export type CodedError = Error & { code: string; during?: string }

/** A temp dir for one test file, removed after it; every store opened through it is closed. */
export function fixture(prefix: string) {
  let dir = ''
  let n = 0
  const open: SessionState[] = []
  beforeAll(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), `sa-${prefix}-`))
  })
  afterEach(() => {
    for (const s of open.splice(0)) s.close()
  })
  afterAll(() => {
    fs.rmSync(dir, { recursive: true, force: true })
  })
  return {
    /** A fresh database path (nothing exists there yet). */
    file(name = 'state'): string {
      n += 1
      return path.join(dir, `${name}-${n}.sqlite`)
    },
    /** The temp dir itself. */
    dir(): string {
      return dir
    },
    /** Opens a store that is closed after the test. */
    open(file: string, options?: SessionStateOptions): SessionState {
      const s = new SessionState(file, options)
      open.push(s)
      return s
    },
  }
}

/** A clock the test moves by hand. */
export class Clock {
  now: number
  constructor(start = T0) {
    this.now = start
  }
  readonly fn = (): number => this.now
  advance(ms: number): number {
    this.now += ms
    return this.now
  }
}

/** Collects what `onError` receives. */
export function errorSink() {
  const errors: CodedError[] = []
  return {
    errors,
    onError: (err: CodedError) => {
      errors.push(err)
    },
    codes: () => errors.map((e) => e.code),
  }
}

/** Collects what `wake` receives. */
export function wakeSink() {
  const wakes: WakeRequest[] = []
  return {
    wakes,
    wake: (req: WakeRequest) => {
      wakes.push(req)
    },
    /** The woken watchers and reasons, in call order. */
    calls: () => wakes.map((w) => [w.sessionKey, w.reason]),
  }
}

/** The error `fn` throws, to check its code and what its message names. */
export function errOf(fn: () => unknown): { code: string; message: string } {
  try {
    fn()
  } catch (e) {
    return e as CodedError & { message: string }
  }
  throw new Error('expected a throw')
}

/** The `code` of the error `fn` throws; fails the test when it does not throw. */
export function codeOf(fn: () => unknown): string {
  try {
    fn()
  } catch (e) {
    return (e as CodedError).code
  }
  throw new Error('expected a throw')
}

/** Resolves after `ms` of real time. */
export function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

/** Polls `pred` until it holds; fails after a generous bound (the machine may be loaded). */
export async function waitFor(pred: () => boolean, what: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!pred()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await delay(10)
  }
}

/**
 * Lets background work that should NOT happen have its chance to happen, before a negative
 * assertion. Never a timing assertion: a slow machine can only hide a bug here, not fail a
 * correct build.
 */
export function settle(ms = 400): Promise<void> {
  return delay(ms)
}

/** A better-sqlite3 handle on a file, for looking behind the API. */
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
 * Opens `file` with better-sqlite3 in this process. Only while no SessionState of this process
 * has the file open: two SQLite libraries in one process do not see each other's POSIX locks,
 * so closing one handle would drop the other's locks (and may remove its WAL index under it).
 * While a store is open, use `sql`, which reads from another process.
 */
export function rawDb(file: string): RawDb {
  // No type package is installed for better-sqlite3; RawDb names the few calls used.
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const Database = require('better-sqlite3')
  return new Database(file) as RawDb
}

const SQL_READER = `
  const Database = require(process.argv[1])
  const db = new Database(process.argv[2], { readonly: true })
  const rows = db.prepare(process.argv[3]).all(...JSON.parse(process.argv[4]))
  db.close()
  process.stdout.write(JSON.stringify(rows))
`

/** Runs a read-only query on `file` from another process, as another gateway would. */
export function sql(file: string, query: string, ...params: unknown[]): Array<Record<string, unknown>> {
  const out = childProcess.spawnSync(
    process.execPath,
    ['-e', SQL_READER, require.resolve('better-sqlite3'), file, query, JSON.stringify(params)],
    { encoding: 'utf8', timeout: 30_000 },
  )
  if (out.status !== 0) throw new Error(`sql reader failed: ${out.stderr}`)
  return JSON.parse(out.stdout)
}

/** The cursor row of (watcher, target) as stored, or undefined. */
export function cursorRow(file: string, watcher: string, target: string) {
  const rows = sql(
    file,
    'SELECT last_seen_sequence AS l, notified_sequence AS n, material_sequence AS m, provenance ' +
      'FROM session_watch_cursors WHERE watcher_session_key = ? AND target_session_key = ?',
    watcher,
    target,
  )
  return rows[0]
}

/**
 * A process holding the write lock of `file` until `release()`: for ERR_DB on busy. Another
 * process, because POSIX locks of one process never conflict with each other.
 */
export async function holdWriteLock(file: string): Promise<{ release: () => Promise<void> }> {
  const script = `
    const Database = require(process.argv[1])
    const db = new Database(process.argv[2])
    db.exec('BEGIN IMMEDIATE')
    process.stdout.write('locked\\n')
    process.stdin.once('data', () => { db.exec('ROLLBACK'); db.close(); process.exit(0) })
  `
  const child = childProcess.spawn(process.execPath, ['-e', script, require.resolve('better-sqlite3'), file], {
    stdio: ['pipe', 'pipe', 'inherit'],
  })
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  await new Promise<void>((resolve, reject) => {
    let seen = ''
    child.stdout.on('data', (chunk: Buffer) => {
      seen += chunk.toString()
      if (seen.includes('locked')) resolve()
    })
    child.once('exit', (code) => reject(new Error(`lock holder exited early (${code})`)))
  })
  return {
    release: async () => {
      child.stdin.write('go\n')
      await exited
    },
  }
}

/** The pinned notice text of semantics.md#cursors. */
export function noticeText(target: string, since: number): string {
  // The key as a JSON literal; U+0085, U+2028 and U+2029, which JSON.stringify leaves raw,
  // are escaped as well.
  const t = JSON.stringify(target).replace(/[\u0085\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)
  return `Session ${t} changed (other actor). Reconcile before acting: session_status sessionKey ${t} changesSince ${since}.`
}

/** A human message into `sessionKey` (a notify kind). */
export function human(sessionKey: string, extra: Record<string, unknown> = {}) {
  return { sessionKey, kind: 'human_direct_message' as const, actorType: 'human' as const, summary: 'human message', ...extra }
}

/** A child spawn of `child` by `parent`: seeds the parent's cursor. */
export function spawn(child: string, parent: string) {
  return {
    sessionKey: child,
    kind: 'child_spawned' as const,
    actorType: 'agent' as const,
    actorId: parent,
    summary: 'child spawned',
    watchers: [parent],
  }
}

/** `v`, failing the test when it is null (a record that should have been stored). */
export function must<T>(v: T | null | undefined): T {
  if (v === null || v === undefined) throw new Error('expected a value, got null')
  return v
}

/** The error a promise rejects with; fails the test when it resolves. */
export async function rejection(p: Promise<unknown>): Promise<CodedError> {
  try {
    await p
  } catch (e) {
    return e as CodedError
  }
  throw new Error('expected a rejection')
}
