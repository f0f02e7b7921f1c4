// The Promise API (semantics.md#promise-api): every *Async method gives what its synchronous
// twin gives on the same state; calls commit in call order, synchronous ones after the
// Promise API's calls made before them; close waits and refuses later calls; failures keep
// their codes; a process exits by itself with every promise settled; worker threads.
import { spawnSync } from 'node:child_process'
import * as path from 'node:path'
import { Worker } from 'node:worker_threads'

import {
  Clock,
  SessionState,
  errorSink,
  fixture,
  holdWriteLock,
  human,
  must,
  type SessionStateOptions,
} from './helpers'
import { ADOPTED, CHILD, CURSOR_ROW_STEPS, MAIN, OTHER, expectReached, promiseSteps, recordsSettleInOrder, rejection, runSteps } from './promise-steps'

const fx = fixture('async')
const ROOT = path.join(__dirname, '..')
// The script of the Promise API without its cursor-row steps.
const steps = promiseSteps({ n: 1 }).filter(([n]) => !CURSOR_ROW_STEPS.has(n))

test('every *Async method gives what its synchronous twin gives on the same state', async () => {
  const clock = new Clock()
  const sync = fx.open(fx.file(), { clock: clock.fn, strict: true })
  const promised = fx.open(fx.file(), { clock: clock.fn, strict: true })
  const { got, want, of } = await runSteps(steps, sync, promised, () => clock.advance(1000))
  expect(got).toEqual(want)
  // The script reached every kind of result.
  expectReached(of, true)
})

test('calls settle in call order, one record after another, and notices are drainable at once', async () => {
  const s = fx.open(fx.file())
  s.watch(MAIN, CHILD)
  await recordsSettleInOrder(s)
  expect(s.drain(MAIN).map((n) => [n.targetKey, n.changesSince])).toEqual([[CHILD, 0]])
  expect(s.stateVersion(CHILD)).toBe(64)
})

test('a synchronous call runs after the Promise API calls made before it', async () => {
  const s = fx.open(fx.file())
  s.watch(MAIN, CHILD)
  const first = s.recordAsync(human(CHILD))
  const watched = s.watchAsync(MAIN, OTHER)
  // Not resolved yet, but committed before these run:
  expect(s.stateVersion(CHILD)).toBe(1)
  expect(s.peek(MAIN).map((n) => n.targetKey)).toEqual([CHILD])
  const second = s.record(human(OTHER))
  expect(must(second).sequence).toBe(2)
  expect(must(await first).sequence).toBe(1)
  expect(await watched).toBe(true)
  // The drain's fast answer waits too: the notice of an unresolved record is handed out.
  const third = s.recordAsync(human(CHILD))
  expect(s.drain(MAIN).map((n) => [n.targetKey, n.changesSince])).toEqual([
    [CHILD, 0],
    [OTHER, 0],
  ])
  expect(must(await third).sequence).toBe(3)
  // A Promise API call made after a synchronous one commits after it.
  s.record(human(OTHER))
  expect(must(await s.recordAsync(human(OTHER))).sequence).toBe(5)
  // The third record came after CHILD's notice was queued: it reopens from 1.
  expect(s.drain(MAIN).map((n) => [n.targetKey, n.changesSince])).toEqual([
    [CHILD, 1],
    [OTHER, 2],
  ])
  expect(s.drain(MAIN).map((n) => [n.targetKey, n.changesSince])).toEqual([[OTHER, 4]])
  // With nothing pending, an empty drain is answered without the addon.
  expect(s.drain(MAIN)).toEqual([])
})

test('drainAsync hands out the notice of a record queued before it, acknowledged off the JS thread', async () => {
  const file = fx.file()
  const s = fx.open(file)
  s.watch(MAIN, CHILD)
  const recorded = s.recordAsync(human(CHILD))
  const drained = s.drainAsync(MAIN)
  const later = s.recordAsync(human(CHILD))
  expect((await drained).map((n) => [n.targetKey, n.changesSince])).toEqual([[CHILD, 0]])
  expect(must(await recorded).sequence).toBe(1)
  expect(must(await later).sequence).toBe(2)
  // The record after the drain opened a fresh notice from the acknowledged position.
  expect(s.peek(MAIN).map((n) => [n.targetKey, n.changesSince])).toEqual([[CHILD, 1]])
  expect(await rejection(s.drainAsync(''))).toBe('ERR_INVALID_ARG')
})

describe('close', () => {
  test('close waits for the calls made before; later calls are refused with ERR_CLOSED', async () => {
    const file = fx.file()
    const errors = errorSink()
    const s = new SessionState(file, { onError: errors.onError })
    const pending = Array.from({ length: 10 }, () => s.recordAsync(human(CHILD)))
    s.close()
    expect((await Promise.all(pending)).map((e) => must(e).sequence)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
    expect(s.isClosed).toBe(true)
    expect(await s.recordAsync(human(CHILD))).toBeNull()
    expect(errors.codes()).toEqual(['ERR_CLOSED'])
    expect(await rejection(s.watchAsync(MAIN, CHILD))).toBe('ERR_CLOSED')
    expect(await rejection(s.changesSinceAsync(CHILD, 0))).toBe('ERR_CLOSED')
    await s.closeAsync()
    const again = new SessionState(file)
    expect(again.stateVersion(CHILD)).toBe(10)
    again.close()
  })

  test('closeAsync waits for the calls made before, refuses later ones and is idempotent', async () => {
    const file = fx.file()
    const errors = errorSink()
    const s = new SessionState(file, { onError: errors.onError })
    s.watch(MAIN, CHILD)
    const pending = Array.from({ length: 5 }, () => s.recordAsync(human(CHILD)))
    const closing = s.closeAsync()
    expect(s.closeAsync()).toBe(closing)
    expect(s.isClosed).toBe(true)
    const late = s.recordAsync(human(CHILD))
    expect(await rejection(s.unwatchAsync(MAIN, CHILD))).toBe('ERR_CLOSED')
    expect(() => s.watch(MAIN, CHILD)).toThrow(expect.objectContaining({ code: 'ERR_CLOSED' }))
    expect(s.record(human(CHILD))).toBeNull()
    await closing
    expect((await Promise.all(pending)).map((e) => must(e).sequence)).toEqual([1, 2, 3, 4, 5])
    expect(await late).toBeNull()
    expect(errors.codes()).toEqual(['ERR_CLOSED', 'ERR_CLOSED'])
    s.close()
    await s.closeAsync()
    const again = new SessionState(file)
    expect(again.stateVersion(CHILD)).toBe(5)
    again.close()
  })

  test('closeAsync on a store that never used the Promise API, and after close', async () => {
    const a = new SessionState(fx.file())
    a.record(human(CHILD))
    await a.closeAsync()
    expect(a.isClosed).toBe(true)
    const b = new SessionState(fx.file())
    b.close()
    await b.closeAsync()
    expect(await rejection(b.pruneAsync())).toBe('ERR_CLOSED')
  })
})

describe('failures', () => {
  test('recordAsync: null plus exactly one onError, or a rejection with strict; same codes', async () => {
    const errors = errorSink()
    const s = fx.open(fx.file(), { onError: errors.onError })
    const bad = { sessionKey: CHILD, kind: 'human_direct_message', actorType: 'human' } as never
    expect(await s.recordAsync(bad)).toBeNull()
    expect(await s.recordAsync(human(CHILD, { kind: 'no_such_kind' }) as never)).toBeNull()
    expect(await s.recordAsync(null as never)).toBeNull()
    expect(errors.codes()).toEqual(['ERR_INVALID_ARG', 'ERR_INVALID_ARG', 'ERR_INVALID_ARG'])
    // Queued together, a failing record leaves the others of its group in.
    const group = [human(CHILD), human(CHILD, { kind: 'no_such_kind' }), human(CHILD)]
    const settled = await Promise.all(group.map((i) => s.recordAsync(i as never)))
    expect(settled.map((e) => e?.sequence ?? null)).toEqual([1, null, 2])
    expect(errors.codes()).toEqual(['ERR_INVALID_ARG', 'ERR_INVALID_ARG', 'ERR_INVALID_ARG', 'ERR_INVALID_ARG'])
    const strict = fx.open(fx.file(), { strict: true })
    expect(await rejection(strict.recordAsync(bad))).toBe('ERR_INVALID_ARG')
    expect(await rejection(strict.recordAsync(human(CHILD, { kind: 'no_such_kind' }) as never))).toBe('ERR_INVALID_ARG')
    expect(await rejection(strict.adoptAsync(ADOPTED, { source: '' }))).toBe('ERR_INVALID_ARG')
    expect(await rejection(strict.checkUpstreamAsync(ADOPTED, { found: 'maybe' } as never))).toBe('ERR_INVALID_ARG')
  })

  test('the other methods reject with the codes their twins throw, and never throw', async () => {
    const s = fx.open(fx.file())
    expect(await rejection(s.watchAsync(MAIN, 42 as never))).toBe('ERR_INVALID_ARG')
    expect(await rejection(s.watchAsync(MAIN, CHILD, { provenance: 'sideways' } as never))).toBe('ERR_INVALID_ARG')
    expect(await rejection(s.watchAsync('', CHILD))).toBe('ERR_INVALID_ARG')
    expect(await rejection(s.acknowledgeAsync(MAIN, 'x' as never))).toBe('ERR_INVALID_ARG')
    expect(await rejection(s.changesSinceAsync(CHILD, -1))).toBe('ERR_INVALID_ARG')
    expect(await rejection(s.stateVersionsAsync({} as never))).toBe('ERR_INVALID_ARG')
    expect(await rejection(s.deleteSessionAsync(''))).toBe('ERR_INVALID_ARG')
    expect(await rejection(s.sweepAsync({ watcherExists: 1 } as never))).toBe('ERR_INVALID_ARG')
    s.watch(MAIN, CHILD)
    s.record(human(CHILD))
    const throwing = () => {
      throw new Error('no')
    }
    expect(await rejection(s.sweepAsync({ watcherExists: throwing }))).toBe('ERR_INVALID_ARG')
    // A refused call changed nothing: the cursor is still behind.
    expect(s.peek(MAIN).map((n) => n.targetKey)).toEqual([CHILD])
  })

  test('a write lock held by another process beyond the busy timeout: ERR_DB, off the JS thread', async () => {
    const file = fx.file()
    const errors = errorSink()
    const s = fx.open(file, { onError: errors.onError, busyTimeoutMs: 0 })
    s.watch(MAIN, CHILD)
    const strict = fx.open(file, { strict: true, busyTimeoutMs: 0 })
    const lock = await holdWriteLock(file)
    try {
      expect(await s.recordAsync(human(CHILD))).toBeNull()
      expect(errors.codes()).toEqual(['ERR_DB'])
      expect(await rejection(strict.recordAsync(human(CHILD)))).toBe('ERR_DB')
      expect(await rejection(s.watchAsync(MAIN, OTHER))).toBe('ERR_DB')
    } finally {
      await lock.release()
    }
    expect(must(await s.recordAsync(human(CHILD))).sequence).toBe(1)
    expect(s.peek(MAIN).map((n) => n.targetKey)).toEqual([CHILD])
  })
})

describe('open', () => {
  test('SessionState.open opens off the JS thread and works as the constructor', async () => {
    const file = fx.file()
    const clock = new Clock()
    const s = await SessionState.open(file, { clock: clock.fn, strict: true })
    try {
      s.watch(MAIN, CHILD)
      expect(must(await s.recordAsync(human(CHILD))).occurredAt).toBe(clock.now)
      expect(s.drain(MAIN).map((n) => n.changesSince)).toEqual([0])
    } finally {
      await s.closeAsync()
    }
  })

  test('SessionState.open rejects with the constructor codes', async () => {
    const bad: SessionStateOptions = { retentionMs: 0 }
    expect(await rejection(SessionState.open(fx.file(), bad))).toBe('ERR_INVALID_ARG')
    expect(await rejection(SessionState.open(42 as never))).toBe('ERR_INVALID_ARG')
    expect(await rejection(SessionState.open(fx.dir()))).toBe('ERR_DB')
    expect(() => new SessionState(fx.dir())).toThrow(expect.objectContaining({ code: 'ERR_DB' }))
  })
})

const SCRIPT = `
const { SessionState } = require(process.argv[1])
const path = require('node:path')
const s = new SessionState(path.join(process.argv[2], 'exits-' + process.pid + '.sqlite'))
s.watch('agent:main:main', 'agent:main:subagent:c')
let settled = 0
for (let i = 0; i < 50; i++) {
  s.recordAsync({ sessionKey: 'agent:main:subagent:c', kind: 'goal_changed', actorType: 'human', summary: 'g' })
    .then((e) => { settled += 1; if (settled === 50) console.log(JSON.stringify({ settled, last: e.sequence })) })
}
s.watchAsync('agent:main:main', 'agent:main:subagent:d').then((w) => console.log(JSON.stringify({ watched: w })))
`

test('a process exits by itself once every promise has settled, its store left open', () => {
  const out = spawnSync(process.execPath, ['-e', SCRIPT, ROOT, fx.dir()], { encoding: 'utf8', timeout: 60_000 })
  expect(out.stderr).toBe('')
  expect(out.status).toBe(0)
  expect(out.stdout.trim().split('\n').map((l) => JSON.parse(l))).toEqual([{ settled: 50, last: 50 }, { watched: true }])
})

const HANDLES = `
const { SessionState } = require(process.argv[1])
const path = require('node:path')
const handles = () => process.getActiveResourcesInfo().join(',')
const input = { sessionKey: 'agent:main:subagent:c', kind: 'goal_changed', actorType: 'human', summary: 'g' }
;(async () => {
  const seen = [handles()]
  const codes = []
  const s = new SessionState(path.join(process.argv[2], 'handles-' + process.pid + '.sqlite'), {
    onError: (e) => codes.push(e.code),
  })
  const first = s.recordAsync(input)
  seen.push(handles())
  await first
  seen.push(handles())
  const last = s.recordAsync(input)
  s.close()
  seen.push(handles())
  seen.push((await last).sequence)
  seen.push(handles())
  seen.push(await s.recordAsync(input), handles(), codes)
  console.log(JSON.stringify(seen))
})()
`

test('a store holds a referenced handle only while its promises wait, and none once closed', () => {
  const out = spawnSync(process.execPath, ['-e', HANDLES, ROOT, fx.dir()], { encoding: 'utf8', timeout: 60_000 })
  expect(out.stderr).toBe('')
  expect(out.status).toBe(0)
  expect(JSON.parse(out.stdout)).toEqual(['', 'Timeout', '', 'Timeout', 2, '', null, '', ['ERR_CLOSED']])
})

const WORKER = `
const { parentPort, workerData } = require('node:worker_threads')
const { SessionState } = require(workerData.root)
;(async () => {
  const s = await SessionState.open(workerData.file, { strict: true })
  const seqs = await Promise.all(
    Array.from({ length: 20 }, () =>
      s.recordAsync({ sessionKey: 'agent:main:subagent:w', kind: 'goal_changed', actorType: 'human', summary: 'w' }),
    ),
  )
  const version = s.stateVersion('agent:main:subagent:w')
  if (workerData.close) await s.closeAsync()
  parentPort.postMessage({ count: seqs.length, version })
})()
`

function runWorker(file: string, close: boolean): Promise<{ message: unknown; exitCode: number }> {
  return new Promise((resolve, reject) => {
    const w = new Worker(WORKER, { eval: true, workerData: { root: ROOT, file, close } })
    let message: unknown
    w.on('message', (m) => {
      message = m
    })
    w.on('error', reject)
    w.on('exit', (exitCode) => resolve({ message, exitCode }))
  })
}

test('worker threads: one store per thread, several on one file in the process', async () => {
  const file = fx.file()
  const s = fx.open(file)
  s.watch(MAIN, 'agent:main:subagent:w')
  const mine = Array.from({ length: 20 }, () => s.recordAsync(human(CHILD)))
  const [a, b] = await Promise.all([runWorker(file, true), runWorker(file, false)])
  await Promise.all(mine)
  expect(a).toEqual({ message: { count: 20, version: expect.any(Number) }, exitCode: 0 })
  expect(b).toEqual({ message: { count: 20, version: expect.any(Number) }, exitCode: 0 })
  // Every record of the three stores is in the one file, none lost.
  expect(s.changesSince('agent:main:subagent:w', 0, { limit: 200 }).stateChanges.events).toHaveLength(40)
  expect(s.changesSince(CHILD, 0, { limit: 200 }).stateChanges.events).toHaveLength(20)
})
