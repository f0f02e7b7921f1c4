// Wake (semantics.md#wake): main-like explicit watchers only, coalesced per watcher, never inside record,
// cancelled by close, a throwing callback reported, and a weak callback that never keeps Node
// alive.
import { spawnSync } from 'node:child_process'
import * as path from 'node:path'
import { types } from 'node:util'

import { errorSink, fixture, human, must, settle, spawn, waitFor, wakeSink } from './helpers'

const fx = fixture('wake')
const MAIN = 'agent:main:main'
const T1 = 'agent:ops:t1'
const T2 = 'agent:ops:t2'
const T3 = 'agent:ops:t3'

describe('who is woken', () => {
  test('main-like explicit watchers only: nested watchers never, subagentx is main-like', async () => {
    const sink = wakeSink()
    const s = fx.open(fx.file(), { wake: sink.wake, wakeCoalesceMs: 10 })
    const nested = 'agent:main:subagent:x'
    const deeper = 'agent:ops:subagent:x:subagent:y'
    const subagentx = 'agent:main:subagentx'
    for (const w of [MAIN, nested, deeper, subagentx]) expect(s.watch(w, T1)).toBe(true)
    must(s.record(human(T1)))
    await waitFor(() => sink.wakes.length >= 2, 'two wakes')
    await settle()
    expect(sink.wakes.map((w) => w.sessionKey).sort()).toEqual([MAIN, subagentx].sort())
    expect(sink.wakes.find((w) => w.sessionKey === MAIN)).toStrictEqual({
      source: 'session-state',
      intent: 'immediate',
      reason: `session-state:${T1}`,
      sessionKey: MAIN,
    })
    // Queue-only: the nested watchers' notices wait for their next turn.
    expect(s.peek(nested).map((n) => n.changesSince)).toEqual([0])
    expect(s.peek(deeper).map((n) => n.changesSince)).toEqual([0])
  })

  test('every qualified watcher that is not nested is woken; SubAgent: in any case is nested, as OpenClaw reads it', async () => {
    const sink = wakeSink()
    const s = fx.open(fx.file(), { wake: sink.wake, wakeCoalesceMs: 10 })
    const mainLike = ['agent:main:telegram:dm:1', 'agent:main:cron:nightly', 'agent:main:subagent']
    const nested = ['agent:main:SubAgent:x', 'agent:main:SUBAGENT:y']
    for (const w of [...mainLike, ...nested]) expect(s.watch(w, T1)).toBe(true)
    must(s.record(human(T1)))
    await waitFor(() => sink.wakes.length >= 3, 'three wakes')
    await settle()
    expect(sink.wakes.map((w) => w.sessionKey).sort()).toEqual([...mainLike].sort())
    for (const w of nested) expect(s.peek(w).map((n) => n.changesSince)).toEqual([0])
  })

  test('run_completed and run_failed are log only by default; notifyKinds makes them notify', async () => {
    const sink = wakeSink()
    const child = 'agent:main:subagent:c'
    const done = (kind: 'run_completed' | 'run_failed') => ({ sessionKey: child, kind, actorType: 'system' as const, summary: kind })
    const quiet = fx.open(fx.file(), { wake: sink.wake, wakeCoalesceMs: 0 })
    expect(quiet.watch(MAIN, child)).toBe(true)
    must(quiet.record(done('run_completed')))
    must(quiet.record(done('run_failed')))
    await settle()
    expect([sink.wakes, quiet.peek(MAIN)]).toEqual([[], []])
    expect(quiet.changesSince(child, 0).stateChanges.events.map((e) => e.kind)).toEqual(['run_completed', 'run_failed'])
    const loud = fx.open(fx.file(), {
      wake: sink.wake,
      wakeCoalesceMs: 0,
      notifyKinds: ['human_direct_message', 'goal_changed', 'upstream_missing', 'run_completed', 'run_failed'],
    })
    expect(loud.watch(MAIN, child)).toBe(true)
    must(loud.record(done('run_failed')))
    await waitFor(() => sink.wakes.length === 1, 'the wake of run_failed')
    expect(loud.peek(MAIN).map((n) => [n.targetKey, n.changesSince])).toEqual([[child, 0]])
  })

  test('an ambient-group cursor is queue-only until a later watch promotes it', async () => {
    const sink = wakeSink()
    const s = fx.open(fx.file(), { wake: sink.wake, wakeCoalesceMs: 10 })
    s.watch(MAIN, T1, { provenance: 'ambient-group' })
    must(s.record(human(T1))) // 1
    await settle()
    expect(sink.wakes).toEqual([])
    expect(s.drain(MAIN).map((n) => n.changesSince)).toEqual([0])
    expect(s.watch(MAIN, T1)).toBe(true)
    must(s.record(human(T1))) // 2
    await waitFor(() => sink.wakes.length === 1, 'the wake after promotion')
    expect(sink.calls()).toEqual([[MAIN, `session-state:${T1}`]])
  })

  test('a producer-named watcher of a spawn is explicit, so it is woken', async () => {
    const sink = wakeSink()
    const s = fx.open(fx.file(), { wake: sink.wake, wakeCoalesceMs: 0 })
    const child = 'agent:main:subagent:c'
    must(s.record(spawn(child, MAIN)))
    await settle()
    expect(sink.wakes).toEqual([])
    must(s.record(human(child)))
    await waitFor(() => sink.wakes.length === 1, 'the wake')
    expect(sink.calls()).toEqual([[MAIN, `session-state:${child}`]])
  })

  test('no wake callback: notices still queue', () => {
    const s = fx.open(fx.file())
    s.watch(MAIN, T1)
    must(s.record(human(T1)))
    expect(s.peek(MAIN)).toHaveLength(1)
  })
})

describe('coalescing', () => {
  test('one call per watcher within wakeCoalesceMs, naming the first target', async () => {
    const sink = wakeSink()
    const s = fx.open(fx.file(), { wake: sink.wake, wakeCoalesceMs: 1500 })
    const other = 'agent:ops:main'
    for (const t of [T1, T2, T3]) s.watch(MAIN, t)
    s.watch(other, T2)
    must(s.record(human(T1)))
    must(s.record(human(T2)))
    must(s.record(human(T3)))
    await waitFor(() => sink.wakes.length >= 2, 'two wakes')
    await settle()
    expect(sink.calls().sort()).toEqual(
      [
        [MAIN, `session-state:${T1}`],
        [other, `session-state:${T2}`],
      ].sort(),
    )
    expect(s.peek(MAIN).map((n) => n.targetKey)).toEqual([T1, T2, T3])
  })

  test('twenty material events on a pending notice wake once; the notice entering again wakes again', async () => {
    const sink = wakeSink()
    const s = fx.open(fx.file(), { wake: sink.wake, wakeCoalesceMs: 0 })
    s.watch(MAIN, T1)
    must(s.record(human(T1))) // 1
    await waitFor(() => sink.wakes.length === 1, 'the first wake')
    // The notice is pending: more events enter nothing, so nothing is due.
    for (let i = 0; i < 20; i++) must(s.record(human(T1))) // 2..21
    await settle()
    expect(sink.wakes).toHaveLength(1)
    expect(s.peek(MAIN)).toHaveLength(1)
    // The drain reopens the notice (material events since it opened): a new wake is due.
    expect(s.drain(MAIN).map((n) => n.changesSince)).toEqual([0])
    await waitFor(() => sink.wakes.length === 2, 'the wake of the reopened notice')
    expect(s.drain(MAIN).map((n) => n.changesSince)).toEqual([1])
    await settle()
    expect(sink.calls()).toEqual([
      [MAIN, `session-state:${T1}`],
      [MAIN, `session-state:${T1}`],
    ])
  })

  test('acknowledge reopening a notice makes a wake due too', async () => {
    const sink = wakeSink()
    const s = fx.open(fx.file(), { wake: sink.wake, wakeCoalesceMs: 0 })
    s.watch(MAIN, T1)
    must(s.record(human(T1)))
    await waitFor(() => sink.wakes.length === 1, 'the first wake')
    must(s.record(human(T1)))
    expect(s.acknowledge(MAIN, [T1])).toBe(1)
    await waitFor(() => sink.wakes.length === 2, 'the second wake')
  })
})

describe('delivery', () => {
  test('never inside record, even with wakeCoalesceMs 0', async () => {
    const sink = wakeSink()
    const s = fx.open(fx.file(), { wake: sink.wake, wakeCoalesceMs: 0 })
    s.watch(MAIN, T1)
    must(s.record(human(T1)))
    expect(sink.wakes).toEqual([])
    await waitFor(() => sink.wakes.length === 1, 'the wake')
  })

  test('a throwing callback is reported as ERR_WAKE_CALLBACK and the process lives on', async () => {
    const errors = errorSink()
    let calls = 0
    const s = fx.open(fx.file(), {
      wakeCoalesceMs: 0,
      onError: errors.onError,
      wake: () => {
        calls += 1
        throw new Error('host wake failed')
      },
    })
    s.watch(MAIN, T1)
    s.watch(MAIN, T2)
    must(s.record(human(T1)))
    await waitFor(() => errors.errors.length === 1, 'the reported throw')
    expect(calls).toBe(1)
    expect(errors.codes()).toEqual(['ERR_WAKE_CALLBACK'])
    expect(types.isNativeError(errors.errors[0])).toBe(true)
    // Still working: another notice, another wake, another report.
    must(s.record(human(T2)))
    await waitFor(() => errors.errors.length === 2, 'the second report')
    expect(calls).toBe(2)
    expect(s.peek(MAIN).map((n) => n.targetKey)).toEqual([T1, T2])
  })

  test('close cancels a scheduled wake', async () => {
    const sink = wakeSink()
    const s = fx.open(fx.file(), { wake: sink.wake, wakeCoalesceMs: 200 })
    s.watch(MAIN, T1)
    must(s.record(human(T1)))
    s.close()
    await settle(800)
    expect(sink.wakes).toEqual([])
  })

  test('resetSession cancels the watcher’s scheduled wake with its notices', async () => {
    const sink = wakeSink()
    const s = fx.open(fx.file(), { wake: sink.wake, wakeCoalesceMs: 200 })
    const other = 'agent:ops:main'
    s.watch(MAIN, T1)
    s.watch(other, T1)
    must(s.record(human(T1)))
    s.resetSession(MAIN)
    await waitFor(() => sink.wakes.length === 1, 'the other watcher’s wake')
    await settle(400)
    expect(sink.calls()).toEqual([[other, `session-state:${T1}`]])
  })

  test('the weak callbacks do not keep Node alive', () => {
    const dir = fx.dir()
    const script = `
      const { SessionState } = require(${JSON.stringify(path.resolve(__dirname, '..'))})
      const s = new SessionState(${JSON.stringify(path.join(dir, 'alive.sqlite'))}, {
        wakeCoalesceMs: 60000,
        wake: () => console.log('woken'),
        onError: (e) => console.log('error ' + e.code),
      })
      s.watch('agent:main:main', 'agent:main:subagent:c')
      const ev = s.record({ sessionKey: 'agent:main:subagent:c', kind: 'human_direct_message',
        actorType: 'human', summary: 'hi' })
      console.log('recorded ' + ev.sequence + ' pending ' + s.peek('agent:main:main').length)
    `
    const child = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 20_000 })
    expect(child.error).toBeUndefined()
    expect([child.status, child.signal]).toEqual([0, null])
    expect(child.stdout).toBe('recorded 1 pending 1\n')
    expect(child.stderr).toBe('')
  })
})
