// The notice listener (semantics.md#notices-listener): `onNotice` sees every notice entering
// the queue exactly once, in queue order, before the call that queued it returns; notices of
// the background poll arrive as soon as it queues them (the addon's signal), outside any call;
// a throwing listener is reported, never thrown; the signal never keeps Node or the store alive.
//
// OpenClaw 2026.9.6's recordSessionStateEvent enqueues its notices right after its write
// transaction commits and before it returns; acknowledgeSessionStateNotices and
// sweepSessionStateWatchNotices do the same for the notices they reopen or re-queue. The
// listener gives an adapter the same order.
import { spawnSync } from 'node:child_process'
import { join } from 'node:path'

import type { QueuedNotice } from '../lib'
import { errorSink, fixture, human, must, noticeText, spawn, waitFor, encodeNoticeContextKey } from './helpers'

jest.setTimeout(60_000)

const fx = fixture('listener')
const MAIN = 'agent:main:main'
const CHILD = 'agent:main:subagent:c'
const CHILD2 = 'agent:main:subagent:d'
const GROUP = 'agent:main:telegram:group:-1'
const A = '/state/agents/main/agent/openclaw-agent.sqlite'

/** A listener that notes each notice and whether a store call was in progress. */
function listener() {
  const seen: Array<{ inCall: boolean; notice: QueuedNotice }> = []
  let inCall = false
  return {
    seen,
    onNotice: (notice: QueuedNotice) => {
      seen.push({ inCall, notice })
    },
    /** Runs `f` as one store call: notices seen meanwhile were delivered before it returned. */
    call<T>(f: () => T): T {
      inCall = true
      try {
        return f()
      } finally {
        inCall = false
      }
    },
    take() {
      return seen.splice(0)
    },
  }
}

function queued(watcherKey: string, targetKey: string, changesSince: number, extra: Partial<QueuedNotice>): QueuedNotice {
  return {
    watcherKey,
    targetKey,
    changesSince,
    text: noticeText(targetKey, changesSince),
    contextKey: encodeNoticeContextKey(targetKey),
    ...extra,
    wake: extra.wake ?? false,
    queueOnly: extra.queueOnly ?? false,
  } as QueuedNotice
}

test('a record hands each notice it opened to the listener before it returns, in queue order', () => {
  const l = listener()
  const s = fx.open(fx.file(), { strict: true, onNotice: l.onNotice })
  s.watch(MAIN, CHILD, { scope: A })
  s.watch(CHILD2, CHILD)
  s.watch(MAIN, GROUP, { provenance: 'ambient-group' })
  expect(l.take()).toEqual([])
  l.call(() => s.record(human(CHILD))) // 1
  const first = l.take()
  expect(first).toEqual([
    { inCall: true, notice: queued(MAIN, CHILD, 0, { scope: A, wake: true }) },
    { inCall: true, notice: queued(CHILD2, CHILD, 0, {}) },
  ])
  // Key order as documented, an absent scope left out.
  expect(Object.keys(first[0]?.notice as object)).toEqual([
    'watcherKey', 'targetKey', 'changesSince', 'text', 'contextKey', 'scope', 'wake', 'queueOnly',
  ])
  expect('scope' in (first[1]?.notice as object)).toBe(false)
  l.call(() => s.record(human(GROUP))) // 2
  expect(l.take()).toEqual([{ inCall: true, notice: queued(MAIN, GROUP, 0, { queueOnly: true }) }])
  // A second change while the notices are pending enters nothing.
  l.call(() => s.record(human(CHILD))) // 3
  expect(l.take()).toEqual([])
  // The queue matches what the listener saw.
  expect(s.peek(MAIN).map((n) => [n.targetKey, n.changesSince])).toEqual([
    [CHILD, 0],
    [GROUP, 0],
  ])
})

test('drain and acknowledge hand over the notice they reopen before they return', () => {
  const l = listener()
  const s = fx.open(fx.file(), { strict: true, onNotice: l.onNotice })
  must(s.record(spawn(CHILD, MAIN))) // 1
  s.record(human(CHILD)) // 2
  s.record(human(CHILD)) // 3
  s.record(human(CHILD2, { watchers: [MAIN] })) // 4
  expect(l.take().map((x) => [x.notice.targetKey, x.notice.changesSince])).toEqual([
    [CHILD, 1],
    [CHILD2, 0],
  ])
  // drain consumes both; CHILD had material past its frozen N, so it reopens at 2.
  const drained = l.call(() => s.drain(MAIN))
  expect(drained.map((n) => [n.targetKey, n.changesSince])).toEqual([
    [CHILD, 1],
    [CHILD2, 0],
  ])
  expect(l.take()).toEqual([{ inCall: true, notice: queued(MAIN, CHILD, 2, { wake: true }) }])
  s.record(human(CHILD)) // 5: pending, nothing enters
  expect(l.take()).toEqual([])
  expect(l.call(() => s.acknowledge(MAIN, [CHILD]))).toBe(1)
  expect(l.take()).toEqual([{ inCall: true, notice: queued(MAIN, CHILD, 3, { wake: true }) }])
  expect(l.call(() => s.acknowledge(MAIN, [CHILD]))).toBe(1)
  expect(l.take()).toEqual([])
})

test('a sweep after a restart and a self-healing record hand over the notices they re-queue', () => {
  const file = fx.file()
  const first = fx.open(file, { strict: true })
  first.watch(MAIN, CHILD)
  first.watch(MAIN, CHILD2)
  first.record(human(CHILD2)) // 1
  first.record(human(CHILD)) // 2
  first.close()
  const l = listener()
  const s = fx.open(file, { strict: true, onNotice: l.onNotice })
  l.call(() => s.sweep())
  // Ascending re-frozen N: CHILD2 (1) before CHILD (2).
  expect(l.take()).toEqual([
    { inCall: true, notice: queued(MAIN, CHILD2, 0, { wake: true }) },
    { inCall: true, notice: queued(MAIN, CHILD, 0, { wake: true }) },
  ])
  s.close()
  // Without a sweep, the next material event finds the cursor pending and queues it again.
  const l2 = listener()
  const again = fx.open(file, { strict: true, onNotice: l2.onNotice })
  l2.call(() => again.record(human(CHILD))) // 3
  expect(l2.take()).toEqual([{ inCall: true, notice: queued(MAIN, CHILD, 0, { wake: true }) }])
})

test('a throwing listener is reported as ERR_NOTICE_CALLBACK; the call and the other notices go on', () => {
  const sink = errorSink()
  const got: string[] = []
  const s = fx.open(fx.file(), {
    onError: sink.onError,
    onNotice: (n) => {
      got.push(n.watcherKey)
      if (n.watcherKey === MAIN) throw new Error('listener failed')
    },
  })
  s.watch(MAIN, CHILD)
  s.watch(CHILD2, CHILD)
  const e = s.record(human(CHILD))
  expect(e?.sequence).toBe(1)
  expect(got).toEqual([MAIN, CHILD2])
  expect(sink.codes()).toEqual(['ERR_NOTICE_CALLBACK'])
  expect(s.peek(MAIN).length).toBe(1)
})

test('a listener may call back into the store, here acknowledging at once', () => {
  const l = listener()
  const s = fx.open(fx.file(), {
    strict: true,
    onNotice: (n) => {
      l.onNotice(n)
      // An adapter routing notices itself acknowledges at once; no new notice enters.
      if (n.targetKey === CHILD) s.acknowledge(n.watcherKey, [n.targetKey])
    },
  })
  s.watch(MAIN, CHILD)
  s.watch(MAIN, CHILD2)
  l.call(() => s.record(human(CHILD))) // 1
  expect(l.take().map((x) => [x.inCall, x.notice.targetKey, x.notice.changesSince])).toEqual([[true, CHILD, 0]])
  expect(s.peek(MAIN)).toEqual([])
  l.call(() => s.record(human(CHILD2))) // 2
  expect(l.take().map((x) => [x.notice.targetKey, x.notice.changesSince])).toEqual([[CHILD2, 0]])
})

test('invalid onNotice is ERR_INVALID_ARG; without a listener nothing is called', () => {
  expect(() => fx.open(fx.file(), { onNotice: 'x' as never })).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARG' }))
  const s = fx.open(fx.file(), { strict: true, onNotice: null })
  s.watch(MAIN, CHILD)
  expect(s.record(human(CHILD))?.sequence).toBe(1)
  expect(s.drain(MAIN).length).toBe(1)
})

test('a notice opened by another process reaches the listener once the poll queues it, outside any call', async () => {
  const file = fx.file()
  const l = listener()
  const s = fx.open(file, { syncIntervalMs: 20, onNotice: l.onNotice })
  s.watch(MAIN, CHILD, { scope: A })
  const root = join(__dirname, '..')
  const script = `
    const { SessionState } = require(${JSON.stringify(join(root, 'dist'))})
    const s = new SessionState(process.argv[1], { strict: true, syncIntervalMs: 0 })
    s.record({ sessionKey: ${JSON.stringify(CHILD)}, kind: 'goal_changed', actorType: 'human', summary: 'g' })
    s.close()
  `
  const out = spawnSync(process.execPath, ['-e', script, file], { encoding: 'utf8', timeout: 30_000 })
  expect(out.status).toBe(0)
  await waitFor(() => l.seen.length > 0, 'the listener')
  expect(l.take()).toEqual([{ inCall: false, notice: queued(MAIN, CHILD, 0, { scope: A, wake: true }) }])
  expect(s.peek(MAIN).map((n) => [n.targetKey, n.changesSince, n.scope])).toEqual([[CHILD, 0, A]])
})

test('a store with a listener, dropped without close, is collected and never keeps Node alive', () => {
  const file = fx.file()
  // The poll runs often and queues a notice of another store's in the background: the signal is
  // registered and has been used.
  const script = `
    const { SessionState } = require(${JSON.stringify(join(__dirname, '..', 'dist'))})
    const [file] = process.argv.slice(1)
    let heard = 0
    let s = new SessionState(file, { syncIntervalMs: 5, onNotice: () => heard++ })
    s.watch(${JSON.stringify(MAIN)}, ${JSON.stringify(CHILD)})
    const other = new SessionState(file, { syncIntervalMs: 0 })
    other.record({ sessionKey: ${JSON.stringify(CHILD)}, kind: 'goal_changed', actorType: 'human', summary: 'g' })
    other.close()
    const ref = new WeakRef(s)
    s = undefined
    const until = Date.now() + 20000
    const check = () => {
      if (heard === 0 && Date.now() < until) return setTimeout(check, 5)
      global.gc()
      if (ref.deref() !== undefined && Date.now() < until) return setTimeout(check, 20)
      console.log('heard ' + heard + ' ' + (ref.deref() === undefined ? 'collected' : 'alive'))
    }
    check()
  `
  const out = spawnSync(process.execPath, ['--expose-gc', '-e', script, file], { encoding: 'utf8', timeout: 30_000 })
  expect([out.status, out.signal, out.stderr]).toEqual([0, null, ''])
  expect(out.stdout).toBe('heard 1 collected\n')
})
