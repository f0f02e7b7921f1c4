// Notices across gateway processes (semantics.md#processes): real child processes (__test__/fixtures/gateway.js)
// share one database file. No assertion depends on timing: waits poll with generous limits,
// and "only one wake" is proved with barrier wakes that the same process delivers later.
import { spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import { Notice, SessionState, WakeRequest } from '../lib'
import { GatewayProcess, until, type GatewayMessage } from './gateway-process'

// better-sqlite3 reads the cursor rows directly, as a third party to the file.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const Database = require('better-sqlite3')

jest.setTimeout(120_000)

const W = 'agent:main:main'
const T = 'agent:main:subagent:research'

type Message =
  | { type: 'wake'; req: WakeRequest }
  | { type: 'error'; code: string }
  | { type: 'recorded'; index: number; sequence: number | null }

class Gateway extends GatewayProcess {
  readonly wakes: WakeRequest[] = []
  readonly errors: string[] = []
  readonly recorded: number[] = []

  protected override onMessage(raw: GatewayMessage): void {
    const m = raw as Message
    if (m.type === 'wake') {
      this.wakes.push(m.req)
    } else if (m.type === 'error') {
      this.errors.push(m.code)
    } else if (m.type === 'recorded' && m.sequence !== null) {
      this.recorded.push(m.index)
    }
  }

  static start(file: string, options: Record<string, unknown> = {}): Promise<Gateway> {
    return GatewayProcess.fork((child) => new Gateway(child), file, { syncIntervalMs: 20, wakeCoalesceMs: 50, ...options })
  }

  record(input: Record<string, unknown>): Promise<{ sequence: number }> {
    return this.call('record', { input })
  }

  peek(watcher: string): Promise<Notice[]> {
    return this.call('peek', { watcher })
  }

  drain(watcher: string): Promise<Notice[]> {
    return this.call('drain', { watcher })
  }
}

let dir: string
let file: string

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'sa-multiprocess-'))
  file = join(dir, 'state.sqlite')
})

afterEach(async () => {
  await GatewayProcess.stopAll()
  rmSync(dir, { recursive: true, force: true })
})

const human = (sessionKey: string, extra: Record<string, unknown> = {}) => ({
  sessionKey,
  kind: 'human_direct_message',
  actorType: 'human',
  summary: 'human message via telegram',
  ...extra,
})

const text = (target: string, since: number) =>
  `Session ${JSON.stringify(target)} changed (other actor). Reconcile before acting: session_status sessionKey ${JSON.stringify(target)} changesSince ${since}.`

const notice = (watcher: string, target: string, since: number): Notice => ({
  watcherKey: watcher,
  targetKey: target,
  changesSince: since,
  text: text(target, since),
  contextKey: `session-state:${Buffer.from(target, 'utf8').toString('hex')}`,
})

/** Records on a fresh target watched by `watcher` and waits for that wake in `b`: every wake
 * `b` scheduled before it was delivered before it. */
async function barrier(a: Gateway, b: Gateway, watcher: string, target: string): Promise<void> {
  await a.record(human(target))
  await until(() => b.wakes, (w) => w.some((r) => r.sessionKey === watcher), `the barrier wake of ${watcher}`)
}

test('a record in process A reaches a watcher served by process B with its exact text and one wake', async () => {
  const a = await Gateway.start(file)
  const b = await Gateway.start(file)
  expect(await b.call('watch', { watcher: W, target: T })).toBe(true)
  const e = await a.record(human(T))
  expect(e.sequence).toBe(1)
  const seen = await until(() => b.peek(W), (n) => n.length > 0, 'the notice in B')
  expect(seen).toEqual([notice(W, T, 0)])
  await until(() => b.wakes, (w) => w.length > 0, 'the wake in B')
  expect(b.wakes).toEqual([{ source: 'session-state', intent: 'immediate', reason: `session-state:${T}`, sessionKey: W }])
  expect(await b.drain(W)).toEqual([notice(W, T, 0)])
  expect(await b.peek(W)).toEqual([])
  expect(a.errors).toEqual([])
  expect(b.errors).toEqual([])
})

test('twenty rapid records in A give B one notice and one wake', async () => {
  const a = await Gateway.start(file)
  const b = await Gateway.start(file)
  const W2 = 'agent:ops:main'
  const W3 = 'agent:qa:main'
  await b.call('watch', { watcher: W, target: T })
  await b.call('watch', { watcher: W2, target: 'agent:ops:barrier' })
  await b.call('watch', { watcher: W3, target: 'agent:qa:barrier' })
  const seqs = await a.call<number[]>('recordMany', { inputs: Array.from({ length: 20 }, () => human(T)) })
  expect(seqs).toEqual(Array.from({ length: 20 }, (_, i) => i + 1))
  await until(() => b.wakes, (w) => w.length > 0, 'the first wake')
  expect(await b.peek(W)).toEqual([notice(W, T, 0)])
  await barrier(a, b, W2, 'agent:ops:barrier')
  await barrier(a, b, W3, 'agent:qa:barrier')
  expect(b.wakes.map((r) => [r.sessionKey, r.reason])).toEqual([
    [W, `session-state:${T}`],
    [W2, 'session-state:agent:ops:barrier'],
    [W3, 'session-state:agent:qa:barrier'],
  ])
  expect(await b.drain(W)).toEqual([notice(W, T, 0)])
})

test('B acknowledges, A sees it, and a later material event in A reopens from there', async () => {
  const a = await Gateway.start(file)
  const b = await Gateway.start(file)
  await b.call('watch', { watcher: W, target: T })
  const s1 = (await a.record(human(T))).sequence
  await until(() => b.peek(W), (n) => n.length > 0, 'the notice in B')
  // Let the first wake go out before the drain (a drain that empties the watcher withdraws a
  // wake not yet delivered), so the reopened notice's wake is a call of its own rather than
  // one absorbed by coalescing.
  await until(() => b.wakes, (w) => w.length > 0, 'the first wake in B')
  expect(await b.drain(W)).toEqual([notice(W, T, 0)])
  // A's own record queued the notice there too; the acknowledge in B takes it out of A.
  await until(() => a.peek(W), (n) => n.length === 0, 'the acknowledge to reach A')
  expect(await a.drain(W)).toEqual([])
  const s2 = (await a.record(human(T))).sequence
  expect(s2).toBeGreaterThan(s1)
  expect(await a.peek(W)).toEqual([notice(W, T, s1)])
  await until(() => b.peek(W), (n) => n.length > 0, 'the reopened notice in B')
  expect(await b.peek(W)).toEqual([notice(W, T, s1)])
  await until(() => b.wakes, (w) => w.length >= 2, 'the wake of the reopened notice')
  // Whichever process drains first gets it; the other gets nothing.
  expect(await b.drain(W)).toEqual([notice(W, T, s1)])
  expect(await a.drain(W)).toEqual([])
  expect(b.wakes.map((r) => r.sessionKey)).toEqual([W, W])
})

test('killing A mid-stream loses nothing that B should see', async () => {
  const b = await Gateway.start(file, { serveWatchers: [W] })
  const a = await Gateway.start(file)
  const prefix = 'agent:main:subagent:s'
  await a.call('stream', { prefix, watcher: W, count: 100_000 })
  await until(() => a.recorded.length, (n) => n >= 40, 'A to be streaming')
  await a.kill()
  const db = new Database(file, { readonly: true })
  const committed: string[] = db
    .prepare('SELECT session_key FROM session_state_events ORDER BY sequence')
    .all()
    .map((r: { session_key: string }) => r.session_key)
  db.close()
  // Everything A reported was committed; the stream is a prefix of the targets.
  expect(committed.length).toBeGreaterThanOrEqual(a.recorded.length)
  expect(committed).toEqual(Array.from({ length: committed.length }, (_, i) => `${prefix}${i}`))
  const expected = committed.map((t) => notice(W, t, 0))
  await until(() => b.peek(W), (n) => n.length >= expected.length, 'every committed notice in B')
  expect(await b.peek(W)).toEqual(expected)
  expect(await b.drain(W)).toEqual(expected)
  expect(b.errors).toEqual([])
})

test('two processes draining one watcher at once deliver every notice exactly once', async () => {
  const recorder = await Gateway.start(file)
  const a = await Gateway.start(file, { serveWatchers: [W] })
  const b = await Gateway.start(file, { serveWatchers: [W] })
  const targets = Array.from({ length: 5 }, (_, i) => `agent:main:subagent:t${i}`)
  for (const t of targets) await recorder.call('watch', { watcher: W, target: t })
  await a.call('startDrainLoop', { watcher: W })
  await b.call('startDrainLoop', { watcher: W })
  for (let round = 0; round < 20; round++) {
    await recorder.call('recordMany', { inputs: targets.flatMap((t) => [human(t), human(t)]) })
    await new Promise((r) => setTimeout(r, 5))
  }
  const db = new Database(file, { readonly: true })
  const open = db.prepare(
    'SELECT COUNT(*) AS n FROM session_watch_cursors WHERE notified_sequence != last_seen_sequence OR material_sequence > last_seen_sequence',
  )
  await until(() => open.get().n as number, (n) => n === 0, 'every notice to be consumed')
  const delivered = [
    ...(await a.call<Notice[]>('stopDrainLoop')),
    ...(await b.call<Notice[]>('stopDrainLoop')),
  ]
  const keys = delivered.map((n) => `${n.targetKey}@${n.changesSince}`)
  expect(new Set(keys).size).toBe(keys.length)
  for (const n of delivered) expect(n).toEqual(notice(W, n.targetKey, n.changesSince))
  const cursor = db.prepare(
    'SELECT last_seen_sequence AS l, notified_sequence AS n, material_sequence AS m FROM session_watch_cursors WHERE watcher_session_key = ? AND target_session_key = ?',
  )
  const eventsOf = db.prepare('SELECT sequence FROM session_state_events WHERE session_key = ?')
  for (const t of targets) {
    const positions = delivered.filter((n) => n.targetKey === t).map((n) => n.changesSince).sort((x, y) => x - y)
    const c = cursor.get(W, t)
    expect(c.n).toBe(c.l)
    expect(c.m).toBe(c.l)
    // The chain of positions starts where the watch seeded the cursor; every later one, and
    // the last acknowledged one, is an event of the target: no stretch was skipped.
    expect(positions[0]).toBe(0)
    const seqs = new Set(eventsOf.all(t).map((r: { sequence: number }) => r.sequence))
    for (const p of [...positions.slice(1), c.l]) expect(seqs.has(p)).toBe(true)
  }
  db.close()
  // Notices each process held and the other consumed leave its queue with its next poll.
  await until(() => a.peek(W), (n) => n.length === 0, "A's queue to empty")
  await until(() => b.peek(W), (n) => n.length === 0, "B's queue to empty")
})

test('remote notices keep the nested and ambient-group rules: queued, never woken', async () => {
  const a = await Gateway.start(file)
  const b = await Gateway.start(file)
  const nested = 'agent:main:subagent:coordinator'
  const ambient = 'agent:ops:main'
  const W3 = 'agent:qa:main'
  await b.call('watch', { watcher: nested, target: T })
  await b.call('watch', { watcher: ambient, target: T, options: { provenance: 'ambient-group' } })
  await b.call('watch', { watcher: W3, target: 'agent:qa:barrier' })
  await a.record(human(T))
  await until(() => b.peek(ambient), (n) => n.length > 0, 'the ambient notice in B')
  await until(() => b.peek(nested), (n) => n.length > 0, 'the nested notice in B')
  await barrier(a, b, W3, 'agent:qa:barrier')
  expect(b.wakes.map((r) => r.sessionKey)).toEqual([W3])
  expect(await b.drain(nested)).toEqual([notice(nested, T, 0)])
  expect(await b.drain(ambient)).toEqual([notice(ambient, T, 0)])
})

test('serveWatchers serves a watcher before any call names it; others are not served until asked', async () => {
  const a = await Gateway.start(file)
  const b = await Gateway.start(file, { serveWatchers: [W] })
  const other = 'agent:ops:main'
  await a.call('watch', { watcher: W, target: T })
  await a.call('watch', { watcher: other, target: T })
  await a.record(human(T))
  await until(() => b.wakes, (w) => w.length > 0, 'the wake in B')
  // B never asked about `other`: no wake for it, and nothing queued until it is served.
  const W3 = 'agent:qa:main'
  await b.call('watch', { watcher: W3, target: 'agent:qa:barrier' })
  await barrier(a, b, W3, 'agent:qa:barrier')
  expect(b.wakes.map((r) => r.sessionKey)).toEqual([W, W3])
  // Its first peek serves it and reads what is pending from the file at once.
  expect(await b.peek(other)).toEqual([notice(other, T, 0)])
  expect(await b.drain(other)).toEqual([notice(other, T, 0)])
  expect(await b.drain(W)).toEqual([notice(W, T, 0)])
})

test('the poll never keeps Node alive', () => {
  const script = `
    const { SessionState } = require(${JSON.stringify(join(__dirname, '..'))})
    const s = new SessionState(${JSON.stringify(file)}, { syncIntervalMs: 1, wake: () => {} })
    s.watch('agent:main:main', 'agent:main:x')
    s.record({ sessionKey: 'agent:main:x', kind: 'human_direct_message', actorType: 'human', summary: 'hi' })
  `
  const r = spawnSync(process.execPath, ['-e', script], { timeout: 60_000 })
  expect(r.signal).toBeNull()
  expect(r.status).toBe(0)
})

test('the options are checked', () => {
  for (const syncIntervalMs of [-1, 1.5, 60_001, Number.NaN]) {
    expect(() => new SessionState(file, { syncIntervalMs })).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARG' }))
  }
  expect(() => new SessionState(file, { serveWatchers: [''] })).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARG' }))
  const off = new SessionState(file, { syncIntervalMs: 0, serveWatchers: [W, 'global'] })
  expect(off.peek(W)).toEqual([])
  off.close()
  const on = new SessionState(file, { syncIntervalMs: 60_000, serveWatchers: [W, 'global'] })
  on.close()
})
