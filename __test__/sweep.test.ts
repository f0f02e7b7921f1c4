// Sweep at gateway start (semantics.md#cursors, semantics.md#wake): pending notices are restored from the cursor rows after a
// reopen, in ascending order of the re-frozen N, exactly once, then a prune runs.
import { Clock, RETENTION, cursorRow, fixture, human, must, settle, sql, waitFor, wakeSink } from './helpers'

const fx = fixture('sweep')
const MAIN = 'agent:main:main'
const NESTED = 'agent:main:subagent:n'
const T1 = 'agent:ops:t1'
const T2 = 'agent:ops:t2'
const T3 = 'agent:ops:t3'

/** A file where MAIN has pending notices on T2 (N = 3), T1 (N = 4, M = 5) and T3 (acknowledged). */
function scenario(file: string) {
  const s = fx.open(file)
  for (const t of [T1, T2, T3]) s.watch(MAIN, t)
  s.watch(NESTED, T1)
  must(s.record(human(T3))) // 1
  expect(s.drain(MAIN).map((n) => n.changesSince)).toEqual([0]) // T3: L = N = M = 1
  must(s.record({ sessionKey: T1, kind: 'created', actorType: 'system', summary: 'c' })) // 2: log only
  must(s.record(human(T2))) // 3
  must(s.record(human(T1))) // 4
  must(s.record(human(T1))) // 5
  expect(s.peek(MAIN).map((n) => [n.targetKey, n.changesSince])).toEqual([
    [T2, 0],
    [T1, 0],
  ])
  s.close()
  expect(cursorRow(file, MAIN, T1)).toEqual({ l: 0, n: 4, m: 5, provenance: 'explicit' })
  expect(cursorRow(file, MAIN, T2)).toEqual({ l: 0, n: 3, m: 3, provenance: 'explicit' })
  expect(cursorRow(file, MAIN, T3)).toEqual({ l: 1, n: 1, m: 1, provenance: 'explicit' })
  expect(cursorRow(file, NESTED, T1)).toEqual({ l: 0, n: 4, m: 5, provenance: 'explicit' })
}

// Without cross-process delivery: with it, a watcher's first drain or peek in the process
// reads its pending notices from the file itself (semantics.md#processes; the last test).
const LOCAL = { syncIntervalMs: 0 }

test('a reopened store has an empty queue until sweep restores it, in ascending order of re-frozen N', async () => {
  const file = fx.file()
  scenario(file)
  const sink = wakeSink()
  const s = fx.open(file, { ...LOCAL, wake: sink.wake, wakeCoalesceMs: 0 })
  expect(s.peek(MAIN)).toEqual([])
  expect(s.drain(MAIN)).toEqual([])
  expect(s.sweep()).toStrictEqual({ notices: 3, prune: { eventsDeleted: 0, cursorsDeleted: 0 } })
  // T1 is re-frozen at N = M = 5, after T2's N = 3.
  expect(cursorRow(file, MAIN, T1)).toEqual({ l: 0, n: 5, m: 5, provenance: 'explicit' })
  expect(s.peek(MAIN).map((n) => [n.targetKey, n.changesSince])).toEqual([
    [T2, 0],
    [T1, 0],
  ])
  expect(s.peek(NESTED).map((n) => [n.targetKey, n.changesSince])).toEqual([[T1, 0]])
  await waitFor(() => sink.wakes.length === 1, 'the wake of the restored notices')
  // Sweeping again duplicates nothing and wakes nobody.
  expect(s.sweep()).toStrictEqual({ notices: 3, prune: { eventsDeleted: 0, cursorsDeleted: 0 } })
  expect(s.peek(MAIN)).toHaveLength(2)
  await settle()
  expect(sink.calls()).toEqual([[MAIN, `session-state:${T2}`]])
  // The restored notices drain as usual; re-frozen, nothing reopens.
  expect(s.drain(MAIN).map((n) => [n.targetKey, n.changesSince])).toEqual([
    [T2, 0],
    [T1, 0],
  ])
  expect(s.drain(MAIN)).toEqual([])
  expect(s.sweep().notices).toBe(1) // NESTED's, still pending
})

test('a notice already queued in this process is neither duplicated nor woken again', async () => {
  const sink = wakeSink()
  const s = fx.open(fx.file(), { wake: sink.wake, wakeCoalesceMs: 0 })
  s.watch(MAIN, T1)
  must(s.record(human(T1))) // 1
  await waitFor(() => sink.wakes.length === 1, 'the wake')
  must(s.record(human(T1))) // 2: M moves, the notice stays
  expect(s.sweep().notices).toBe(1)
  expect(s.peek(MAIN).map((n) => n.changesSince)).toEqual([0])
  await settle()
  expect(sink.wakes).toHaveLength(1)
  // Re-frozen at N = M = 2: nothing reopens after the drain.
  expect(s.drain(MAIN).map((n) => n.changesSince)).toEqual([0])
  expect(s.drain(MAIN)).toEqual([])
})

test('watcherExists filters the watchers, asked once each', () => {
  const file = fx.file()
  scenario(file)
  const s = fx.open(file, LOCAL)
  const asked: string[] = []
  const report = s.sweep({
    watcherExists: (w) => {
      asked.push(w)
      return w === NESTED
    },
  })
  expect(report).toStrictEqual({ notices: 1, prune: { eventsDeleted: 0, cursorsDeleted: 0 } })
  expect(asked.sort()).toEqual([MAIN, NESTED].sort())
  expect(s.peek(MAIN)).toEqual([])
  expect(s.peek(NESTED).map((n) => n.targetKey)).toEqual([T1])
  // The skipped watcher's cursor is left as it was.
  expect(cursorRow(file, MAIN, T1)).toEqual({ l: 0, n: 4, m: 5, provenance: 'explicit' })
})

test('a throwing watcherExists throws ERR_INVALID_ARG', () => {
  const file = fx.file()
  scenario(file)
  const s = fx.open(file)
  expect(() =>
    s.sweep({
      watcherExists: () => {
        throw new Error('host bug')
      },
    }),
  ).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARG' }))
})

test('a material event after a reopen self-heals a notice lost from memory', () => {
  const file = fx.file()
  scenario(file)
  const s = fx.open(file, LOCAL)
  must(s.record(human(T2))) // 6: T2's notice was pending (N = 3), M moves, the notice is queued again
  expect(s.peek(MAIN).map((n) => [n.targetKey, n.changesSince])).toEqual([[T2, 0]])
  expect(cursorRow(file, MAIN, T2)).toEqual({ l: 0, n: 3, m: 6, provenance: 'explicit' })
})

test("with cross-process delivery on, a reopened store's first drain reads the watcher's pending notices", async () => {
  const file = fx.file()
  scenario(file)
  const sink = wakeSink()
  const s = fx.open(file, { wake: sink.wake, wakeCoalesceMs: 1000 })
  // In ascending N, as a sweep queues them; acknowledged as any drain.
  expect(s.drain(MAIN).map((n) => [n.targetKey, n.changesSince])).toEqual([
    [T2, 0],
    [T1, 0],
  ])
  // T1 reopened from 4 (the seeds' rule); served now, the next drains run as usual.
  expect(s.drain(MAIN).map((n) => [n.targetKey, n.changesSince])).toEqual([[T1, 4]])
  expect(s.drain(MAIN)).toEqual([])
  expect(cursorRow(file, MAIN, T1)).toEqual({ l: 5, n: 5, m: 5, provenance: 'explicit' })
  expect(cursorRow(file, MAIN, T2)).toEqual({ l: 3, n: 3, m: 3, provenance: 'explicit' })
  // The drains left MAIN nothing queued: the wake the read scheduled was withdrawn.
  await settle(1500)
  expect(sink.wakes).toEqual([])
  expect(s.peek(NESTED).map((n) => [n.targetKey, n.changesSince])).toEqual([[T1, 0]])
})

test('the sweep’s prune: a clock 30 days on expires every cursor not updated since', () => {
  const file = fx.file()
  const clock = new Clock()
  const s = fx.open(file, { clock: clock.fn })
  for (const t of [T1, T2, T3]) s.watch(MAIN, t) // updated at T0
  must(s.record(human(T1))) // 1: MAIN/T1 updated at T0
  clock.advance(RETENTION)
  s.watch(MAIN, T2) // refreshed at T0 + 30 d
  clock.advance(1)
  // MAIN/T1 is re-frozen and re-queued, then expires in the sweep's prune: nothing is pending.
  const report = s.sweep()
  expect(report).toStrictEqual({ notices: 0, prune: { eventsDeleted: 1, cursorsDeleted: 2 } })
  expect(cursorRow(file, MAIN, T1)).toBeUndefined()
  expect(cursorRow(file, MAIN, T3)).toBeUndefined()
  expect(cursorRow(file, MAIN, T2)).toEqual({ l: 0, n: 0, m: 0, provenance: 'explicit' })
  // The expired cursor's notice went with it.
  expect(s.peek(MAIN)).toEqual([])
  expect(sql(file, 'SELECT count(*) AS c FROM session_watch_cursors')).toEqual([{ c: 1 }])
})
