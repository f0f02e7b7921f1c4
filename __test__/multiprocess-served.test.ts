// Where a notice lives when several processes share the file (semantics.md#processes): queued
// and woken only in the processes that serve its watcher, and in the recording process only
// when no live process serves it; a crashed server's lease expires; a watcher's first drain
// in a new process reads what is pending. Real child processes (__test__/fixtures/gateway.js),
// each pushing its wakes and the notices entering its queue; waits poll with generous limits.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import type { Notice, QueuedNotice, WakeRequest } from '../lib'
import { GatewayProcess, until, type GatewayMessage } from './gateway-process'

// better-sqlite3 reads the rows directly, as a third party to the file.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const Database = require('better-sqlite3')

jest.setTimeout(120_000)

const W = 'agent:main:main'
const T = 'agent:main:subagent:research'
const BARRIER_W = 'agent:qa:main'
const BARRIER_T = 'agent:qa:barrier'

type Message =
  | { type: 'wake'; req: WakeRequest }
  | { type: 'notice'; notice: QueuedNotice }
  | { type: 'error'; code: string }

class Gateway extends GatewayProcess {
  readonly wakes: string[] = []
  readonly entered: Array<[string, string, number]> = []
  readonly errors: string[] = []

  protected override onMessage(raw: GatewayMessage): void {
    const m = raw as Message
    if (m.type === 'wake') this.wakes.push(m.req.sessionKey)
    else if (m.type === 'notice') this.entered.push([m.notice.watcherKey, m.notice.targetKey, m.notice.changesSince])
    else if (m.type === 'error') this.errors.push(m.code)
  }

  static start(file: string, options: Record<string, unknown> = {}): Promise<Gateway> {
    const opts = { syncIntervalMs: 20, wakeCoalesceMs: 50, listen: true, ...options }
    return GatewayProcess.fork((child) => new Gateway(child), file, opts)
  }

  record(sessionKey: string): Promise<{ sequence: number }> {
    return this.call('record', { input: human(sessionKey) })
  }
}

let dir: string
let file: string

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'sa-served-'))
  file = join(dir, 'state.sqlite')
})

afterEach(async () => {
  await GatewayProcess.stopAll()
  rmSync(dir, { recursive: true, force: true })
})

function human(sessionKey: string) {
  return { sessionKey, kind: 'human_direct_message', actorType: 'human', summary: 'human message via telegram' }
}

const notice = (watcher: string, target: string, since: number): Notice => ({
  watcherKey: watcher,
  targetKey: target,
  changesSince: since,
  text: `Session ${JSON.stringify(target)} changed (other actor). Reconcile before acting: session_status sessionKey ${JSON.stringify(target)} changesSince ${since}.`,
  contextKey: `session-state:${Buffer.from(target, 'utf8').toString('hex')}`,
})

/** The file's rows, read by a third party. */
function rows<R>(sql: string, ...params: unknown[]): R[] {
  const db = new Database(file, { readonly: true })
  try {
    return db.prepare(sql).all(...params) as R[]
  } finally {
    db.close()
  }
}

const leased = () => rows<{ w: string }>('SELECT watcher_key AS w FROM session_awareness_served ORDER BY 1').map((r) => r.w)

const lnm = (watcher: string, target: string) =>
  rows<{ l: number; n: number; m: number }>(
    'SELECT last_seen_sequence AS l, notified_sequence AS n, material_sequence AS m FROM session_watch_cursors ' +
      'WHERE watcher_session_key = ? AND target_session_key = ?',
    watcher,
    target,
  )[0]

/** A record on the barrier target, watched by B only, and its wake in B: every wake B scheduled
 * before it has been delivered. */
async function barrier(recorder: Gateway, b: Gateway): Promise<void> {
  await recorder.record(BARRIER_T)
  await until(() => b.wakes, (w) => w.includes(BARRIER_W), 'the barrier wake')
}

test('the recording process neither queues nor wakes a watcher another live process serves; that one gets it once', async () => {
  const a = await Gateway.start(file)
  const b = await Gateway.start(file)
  expect(await b.call('watch', { watcher: W, target: T })).toBe(true)
  expect(await b.call('watch', { watcher: BARRIER_W, target: BARRIER_T })).toBe(true)
  await until(leased, (l) => l.length === 2, "B's leases")
  expect(leased()).toEqual([W, BARRIER_W].sort())
  expect(await a.call('recordMany', { inputs: [human(T), human(T), human(T)] })).toEqual([1, 2, 3])
  expect(lnm(W, T)).toEqual({ l: 0, n: 1, m: 3 })
  await until(() => b.entered.length, (n) => n > 0, 'the notice in B')
  await barrier(a, b)
  // A: nothing entered its queue, nothing woke. B: the notice once, one wake.
  expect(a.entered).toEqual([])
  expect(a.wakes).toEqual([])
  expect(b.entered).toEqual([
    [W, T, 0],
    [BARRIER_W, BARRIER_T, 0],
  ])
  expect(b.wakes).toEqual([W, BARRIER_W])
  expect(await b.call('drain', { watcher: W })).toEqual([notice(W, T, 0)])
  expect(lnm(W, T)).toEqual({ l: 1, n: 3, m: 3 })
  expect(a.errors).toEqual([])
  expect(b.errors).toEqual([])
})

test('when the serving process is killed and its lease expires, the recording process queues the notice again', async () => {
  const a = await Gateway.start(file)
  const b = await Gateway.start(file, { serveWatchers: [W] })
  await b.call('watch', { watcher: W, target: T })
  await until(leased, (l) => l.includes(W), "B's lease")
  await a.record(T) // 1
  await until(() => b.entered.length, (n) => n === 1, 'the notice in B')
  await b.kill()
  // Its lease outlives it for a while: A still leaves the watcher alone.
  const [{ expires }] = rows<{ expires: number }>('SELECT expires_at AS expires FROM session_awareness_served WHERE watcher_key = ?', W)
  await a.record(T) // 2
  if (Date.now() < expires) expect(a.entered).toEqual([])
  await until(() => Date.now(), (now) => now > expires, 'the lease to expire')
  await a.record(T) // 3: the cursor is still pending (B never drained), and now nobody serves W
  expect(lnm(W, T)).toEqual({ l: 0, n: 1, m: 3 })
  await until(() => a.entered.length, (n) => n === 1, 'the notice in A')
  expect(a.entered).toEqual([[W, T, 0]])
  await until(() => a.wakes.length, (n) => n === 1, 'the wake in A')
  expect(a.wakes).toEqual([W])
  expect(await a.call('drain', { watcher: W })).toEqual([notice(W, T, 0)])
})

test("a watcher's first drain or peek in a new process returns what is pending at once", async () => {
  const a = await Gateway.start(file)
  await a.call('watch', { watcher: W, target: T })
  await a.call('watch', { watcher: 'agent:ops:main', target: T })
  await a.record(T) // 1
  const c = await Gateway.start(file, { syncIntervalMs: 60_000 })
  // No poll of C's has run: the first drain reads the cursor rows itself.
  expect(await c.call('drain', { watcher: W })).toEqual([notice(W, T, 0)])
  expect(await c.call('peek', { watcher: 'agent:ops:main' })).toEqual([notice('agent:ops:main', T, 0)])
  expect(await c.call('drain', { watcher: W })).toEqual([])
  expect(lnm(W, T)).toEqual({ l: 1, n: 1, m: 1 })
  // A held the notice its own record opened; C consumed it, so it leaves A's queue.
  await until(() => a.call<Notice[]>('peek', { watcher: W }), (n) => n.length === 0, "A's queue to empty")
})
