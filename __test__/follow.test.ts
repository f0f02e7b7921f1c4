// Following a session live in one process (semantics.md#follow): replay then live batches,
// never empty, exactly the stored rows in order, historyGap on the first batch and once when
// retention overtakes a slow follower, a stalled follower's memory, the shared wake-ups, and
// every way a follower ends (break, return, abort, close, closeAsync), with Node exiting.
import * as childProcess from 'node:child_process'
import * as path from 'node:path'
import * as v8 from 'node:v8'
import * as vm from 'node:vm'

import { MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics'

import type { ChangeEvent, FollowBatch, Follower } from '../lib'
import { SessionState, fixture } from './helpers'

const fx = fixture('follow')
const K = 'agent:main:subagent:followed'
const OTHER = 'agent:main:subagent:other'
const input = (summary: string, sessionKey = K) => ({ sessionKey, kind: 'goal_changed' as const, actorType: 'agent' as const, summary })

/** Every stored row of `key` after `after`, read page by page with changesSince. */
function stored(state: SessionState, key = K, after = 0): ChangeEvent[] {
  const out: ChangeEvent[] = []
  for (;;) {
    const c = state.changesSince(key, after, { limit: 200 })
    out.push(...c.stateChanges.events)
    if (!c.stateChanges.truncated) return out
    after = c.stateChanges.events.at(-1)!.sequence
  }
}

/** Pulls batches until they hold `count` events in all. */
async function take(f: Follower, count: number): Promise<FollowBatch[]> {
  const out: FollowBatch[] = []
  let n = 0
  while (n < count) {
    const r = await f.next()
    if (r.done) throw new Error(`the follower ended after ${n} of ${count} events`)
    out.push(r.value)
    n += r.value.events.length
  }
  return out
}

const seqs = (batches: FollowBatch[]): number[] => batches.flatMap((b) => b.events.map((e) => e.sequence))

test('replays what is stored in batches of at most limit, then each new batch, events exactly as changesSince returns them', async () => {
  const state = fx.open(fx.file())
  for (let i = 0; i < 5; i++) state.record(input(`s${i}`))
  state.record(input('elsewhere', OTHER))
  const f = state.follow(K, { limit: 2 })
  const replay = await take(f, 5)
  expect(replay.map((b) => b.events.length)).toEqual([2, 2, 1])
  expect(replay.map((b) => b.historyGap)).toEqual([false, false, false])
  expect(replay.flatMap((b) => b.events)).toEqual(stored(state))
  expect(replay.at(-1)!.stateVersion).toBe(5)
  const pending = f.next()
  const e = state.record(input('live'))!
  const live = await pending
  expect(live).toEqual({ done: false, value: { stateVersion: e.sequence, events: [e], historyGap: false } })
  await f.return()
})

test('after skips what it names; the Promise API and the synchronous API both wake it; concatenated batches are the stored rows, none empty', async () => {
  const state = fx.open(fx.file())
  for (let i = 0; i < 3; i++) state.record(input(`old${i}`))
  const f = state.follow(K, { after: 2, limit: 7 })
  const got: FollowBatch[] = []
  const reader = (async () => {
    for await (const b of f) {
      got.push(b)
      if (b.events.at(-1)!.summary === 'last') break
    }
  })()
  for (let i = 0; i < 100; i++) {
    if (i % 3 === 0) state.record(input(`sync${i}`))
    else void state.recordAsync(input(`async${i}`))
    state.record(input('not followed', OTHER))
    if (i % 10 === 0) await new Promise((r) => setImmediate(r))
  }
  await state.recordAsync(input('last'))
  await reader
  expect(got.every((b) => b.events.length >= 1 && b.events.length <= 7 && !b.historyGap)).toBe(true)
  expect(got.flatMap((b) => b.events)).toEqual(stored(state, K, 2))
  // The third old row, 100 live ones and the last.
  expect(seqs(got)).toHaveLength(102)
})

test('bad arguments throw ERR_INVALID_ARG and register nothing', () => {
  const state = fx.open(fx.file())
  const bad: [string, unknown][] = [
    ['', undefined],
    ['   ', undefined],
    [K, { after: -1 }],
    [K, { after: 1.5 }],
    [K, { after: Number.NaN }],
    [K, { after: 2 ** 53 }],
    [K, { after: '3' }],
    [K, { limit: Number.NaN }],
    [K, { limit: Number.POSITIVE_INFINITY }],
    [K, { signal: {} }],
    [K, { agentId: 5 }],
    [K, { since: 3 }],
    [K, []],
  ]
  for (const [key, options] of bad) {
    let code: string | undefined
    try {
      state.follow(key, options as never)
    } catch (e) {
      code = (e as { code?: string }).code
    }
    expect([key, options, code]).toEqual([key, options, 'ERR_INVALID_ARG'])
  }
  expect(state.stats().followersOpen).toBe(0)
})

test('a follower that falls behind retention gets historyGap once and goes on from the earliest row kept', async () => {
  const state = fx.open(fx.file(), { maxEvents: 5 })
  for (let i = 0; i < 4; i++) state.record(input(`a${i}`))
  const f = state.follow(K, { limit: 2 })
  const first = await take(f, 2)
  expect(seqs(first)).toEqual([1, 2])
  for (let i = 0; i < 20; i++) state.record(input(`b${i}`))
  state.prune()
  const kept = stored(state)
  expect(kept.map((e) => e.sequence)).toEqual([20, 21, 22, 23, 24])
  const rest = await take(f, 5)
  expect(rest.map((b) => b.historyGap)).toEqual([true, false, false])
  expect(rest.flatMap((b) => b.events)).toEqual(kept)
  // A new follower from 0 is told the gap on its first batch, as changesSince says it.
  const g = state.follow(K)
  const r = await g.next()
  expect(r.done ? null : [r.value.historyGap, r.value.events.map((e) => e.sequence)]).toEqual([true, [20, 21, 22, 23, 24]])
  await g.return()
  await f.return()
})

test('a gap with no row left goes with the next batch', async () => {
  const state = fx.open(fx.file(), { maxEvents: 1 })
  state.record(input('a'))
  const f = state.follow(K)
  expect(seqs(await take(f, 1))).toEqual([1])
  state.record(input('b', OTHER))
  state.record(input('c'))
  state.record(input('d', OTHER))
  // Everything but the other session's last row goes: the follower had not read #3.
  state.prune()
  expect(stored(state)).toEqual([])
  const next = f.next()
  const e = state.record(input('e'))!
  expect(await next).toEqual({ done: false, value: { stateVersion: e.sequence, events: [e], historyGap: true } })
  await f.return()
})

test('a stalled follower holds no rows while others write; pulled again, it reads every row in order', async () => {
  v8.setFlagsFromString('--expose-gc')
  const gc = vm.runInNewContext('gc') as () => void
  const state = fx.open(fx.file())
  const f = state.follow(K)
  const first = f.next()
  state.record(input('first'))
  expect(seqs([(await first).value as FollowBatch])).toEqual([1])
  const heap = (): number => {
    gc()
    gc()
    return process.memoryUsage().heapUsed
  }
  const before = heap()
  // 4,000 events of about 2 KiB: 8 MiB of rows that a buffering follower would hold.
  const payload = { text: 'x'.repeat(2000) }
  for (let i = 0; i < 40; i++) {
    await Promise.all(Array.from({ length: 100 }, (_, j) => state.recordAsync({ ...input(`w${i}.${j}`), payload })))
  }
  const grown = heap() - before
  // Measured: well under 1 MiB (the store's own caches); a follower holding the rows would be past 8 MiB.
  expect(grown).toBeLessThan(2 * 1024 * 1024)
  const rest = await take(f, 4000)
  expect(rest.every((b) => b.events.length === 200)).toBe(true)
  expect(seqs(rest)).toEqual(stored(state, K, 1).map((e) => e.sequence))
  await f.return()
})

test('many followers of one session share the wake-ups: idle, they read nothing; one record wakes each once', async () => {
  const state = fx.open(fx.file())
  const followers = Array.from({ length: 50 }, () => state.follow(K))
  const pending = followers.map((f) => f.next())
  // Each follower's first read finds nothing; then they wait without reading.
  const deadline = Date.now() + 30_000
  while (state.stats().changesSinceDuration.count < 50 && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 10))
  }
  const reads = state.stats().changesSinceDuration.count
  expect(reads).toBe(50)
  await new Promise((r) => setTimeout(r, 300))
  expect(state.stats().changesSinceDuration.count).toBe(reads)
  expect(state.stats().followersOpen).toBe(50)
  const e = state.record(input('one'))!
  const got = await Promise.all(pending)
  expect(got.every((r) => !r.done && r.value.events.length === 1 && r.value.events[0]!.sequence === e.sequence)).toBe(true)
  expect(state.stats().changesSinceDuration.count).toBe(reads + 50)
  for (const f of followers) await f.return()
  expect(state.stats().followersOpen).toBe(0)
})

/** A reader collected on demand. */
class Reader extends MetricReader {
  protected onForceFlush(): Promise<void> {
    return Promise.resolve()
  }
  protected onShutdown(): Promise<void> {
    return Promise.resolve()
  }
}

/** The value of the `session_awareness.followers.open` gauge now. */
async function gauge(reader: Reader): Promise<unknown> {
  const { resourceMetrics } = await reader.collect()
  const m = resourceMetrics.scopeMetrics.flatMap((x) => x.metrics).filter((x) => x.descriptor.name === 'session_awareness.followers.open')
  return m.flatMap((x) => x.dataPoints.map((d) => [x.descriptor.unit, d.attributes, d.value]))
}

test('break and return() end a follower; the gauge counts the open ones', async () => {
  const reader = new Reader()
  const state = fx.open(fx.file(), { meterProvider: new MeterProvider({ readers: [reader] }) })
  state.record(input('a'))
  const a = state.follow(K)
  const b = state.follow(K)
  const c = state.follow(OTHER)
  expect(state.stats().followersOpen).toBe(3)
  expect(await gauge(reader)).toEqual([['{follower}', { 'session_awareness.store': 'sqlite' }, 3]])
  for await (const batch of a) {
    expect(batch.events).toHaveLength(1)
    break
  }
  expect(state.stats().followersOpen).toBe(2)
  expect(await b.return()).toEqual({ done: true, value: undefined })
  expect(await b.next()).toEqual({ done: true, value: undefined })
  expect(await a.next()).toEqual({ done: true, value: undefined })
  expect(state.stats().followersOpen).toBe(1)
  await c.return()
  expect(state.stats().followersOpen).toBe(0)
  expect(await gauge(reader)).toEqual([['{follower}', { 'session_awareness.store': 'sqlite' }, 0]])
  // Writes after the end reach nobody and fail nothing.
  expect(state.record(input('b'))).not.toBeNull()
})

test('an aborted signal ends a follower: a pending next() resolves done; an already aborted one ends it at once', async () => {
  const state = fx.open(fx.file())
  const ac = new AbortController()
  const f = state.follow(K, { signal: ac.signal })
  const pending = f.next()
  await new Promise((r) => setTimeout(r, 20))
  ac.abort()
  expect(await pending).toEqual({ done: true, value: undefined })
  expect(state.stats().followersOpen).toBe(0)
  state.record(input('after'))
  expect(await f.next()).toEqual({ done: true, value: undefined })
  const g = state.follow(K, { signal: AbortSignal.abort() })
  expect(await g.next()).toEqual({ done: true, value: undefined })
  expect(state.stats().followersOpen).toBe(0)
})

test('close() and closeAsync() end every follower (done); follow on a closed store throws ERR_CLOSED', async () => {
  for (const how of ['close', 'closeAsync'] as const) {
    const state = new SessionState(fx.file())
    state.record(input('a'))
    const waiting = state.follow(K, { after: 1 })
    const idle = state.follow(OTHER)
    const pending = waiting.next()
    await new Promise((r) => setTimeout(r, 20))
    if (how === 'close') state.close()
    else void state.closeAsync()
    expect(await pending).toEqual({ done: true, value: undefined })
    expect(await idle.next()).toEqual({ done: true, value: undefined })
    let code: string | undefined
    try {
      state.follow(K)
    } catch (e) {
      code = (e as { code?: string }).code
    }
    expect([how, code]).toEqual([how, 'ERR_CLOSED'])
    await state.closeAsync()
  }
})

const ROOT = path.join(__dirname, '..')

function runNode(script: string, file: string): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const p = childProcess.spawn(process.execPath, ['-e', script, file], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] })
    let out = ''
    p.stdout.on('data', (d: Buffer) => (out += d.toString()))
    const timer = setTimeout(() => p.kill('SIGKILL'), 20_000)
    p.on('exit', (code) => {
      clearTimeout(timer)
      resolve({ code, out })
    })
  })
}

test('a pending next() keeps Node alive until the follower ends; then Node exits', async () => {
  const file = fx.file()
  // The abort's timer is unref'd: it fires only because the pending next() keeps Node alive.
  const waiting = `
    const { SessionState } = require('.')
    const state = new SessionState(process.argv[1])
    state.record({ sessionKey: '${K}', kind: 'goal_changed', actorType: 'agent', summary: 'x' })
    const ac = new AbortController()
    const f = state.follow('${K}', { signal: ac.signal })
    f.next().then((r) => { console.log('first', r.value.events.length); return f.next() }).then((r) => console.log('done', r.done))
    setTimeout(() => ac.abort(), 300).unref()
  `
  expect(await runNode(waiting, file)).toEqual({ code: 0, out: 'first 1\ndone true\n' })
  // A record made while the follower waits reaches it before Node could exit.
  const live = `
    const { SessionState } = require('.')
    const state = new SessionState(process.argv[1])
    const f = state.follow('${K}', { after: 1 })
    f.next().then((r) => { console.log('live', r.value.events.map((e) => e.summary).join()); return f.return() })
    setImmediate(() => state.record({ sessionKey: '${K}', kind: 'goal_changed', actorType: 'agent', summary: 'y' }))
  `
  expect(await runNode(live, file)).toEqual({ code: 0, out: 'live y\n' })
  const ended = `
    const { SessionState } = require('.')
    const state = new SessionState(process.argv[1])
    ;(async () => {
      for await (const b of state.follow('${K}')) { console.log('batch', b.events.length); break }
      console.log('ended', state.stats().followersOpen)
    })()
  `
  // The two rows the scripts above recorded, in one batch.
  expect(await runNode(ended, file)).toEqual({ code: 0, out: 'batch 2\nended 0\n' })
})
