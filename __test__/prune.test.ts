// Retention (semantics.md#recording, semantics.md#retention): the automatic prune (the first record after opening, then at most once
// an hour on the clock, in the background), never on open; prune() and cursor expiry.
import { Clock, HOUR, MINUTE, RETENTION, T0, cursorRow, fixture, human, must, settle, waitFor, type SessionState } from './helpers'

const fx = fixture('prune')
const A = 'agent:main:subagent:a'
const B = 'agent:main:subagent:b'
const C = 'agent:main:subagent:c'
const MAIN = 'agent:main:main'

/** Records `n` log-only events on `key` with a store on `file` at `at`, then closes it. */
function writeAt(file: string, at: number, key: string, n: number) {
  const w = fx.open(file, { clock: () => at })
  for (let i = 0; i < n; i++) must(w.record({ sessionKey: key, kind: 'run_completed', actorType: 'agent', summary: 'r' }))
  w.close()
}

const gap = (s: SessionState, key: string) => s.changesSince(key, 0).stateChanges.historyGap
const count = (s: SessionState, key: string) => s.changesSince(key, 0).stateChanges.events.length

test('opening never prunes; the first record does, in the background', async () => {
  const file = fx.file()
  writeAt(file, T0, A, 3) // 1..3
  const clock = new Clock(T0 + RETENTION + 1)
  const s = fx.open(file, { clock: clock.fn, maxEvents: 1 })
  // Reads, watches and drains are not records: nothing is pruned.
  expect(s.watch(MAIN, B)).toBe(true)
  expect(s.drain(MAIN)).toEqual([])
  await settle()
  expect([count(s, A), gap(s, A)]).toEqual([3, false])
  must(s.record(human(B))) // 4
  await waitFor(() => gap(s, A), 'the automatic prune')
  expect(s.changesSince(A, 0).stateChanges).toStrictEqual({
    events: [],
    truncated: false,
    earliestAvailableSequence: 4,
    historyGap: true,
  })
  expect(s.changesSince(A, 3).stateChanges.historyGap).toBe(false)
  expect(s.stateVersion(A)).toBe(3)
  expect(count(s, B)).toBe(1)
  // Nothing is left for a manual prune.
  expect(s.prune()).toStrictEqual({ eventsDeleted: 0, cursorsDeleted: 0 })
})

test('not again within the hour on the clock; again once more than an hour has passed', async () => {
  const file = fx.file()
  const clock = new Clock(T0 + RETENTION + 1)
  writeAt(file, T0, C, 1) // 1
  const s = fx.open(file, { clock: clock.fn })
  must(s.record(human(A))) // 2: the first record prunes
  await waitFor(() => gap(s, C), 'the first automatic prune')
  // The prune goes on looking for old rows after its first batch (C's): rows written before it
  // ends would be its own. Let it end before the old history below is written.
  await settle(1000)
  // Another process writes old history after that prune.
  writeAt(file, T0, B, 2) // 3, 4
  clock.advance(30 * MINUTE)
  must(s.record(human(A))) // 5
  clock.advance(30 * MINUTE) // exactly an hour after the first prune
  must(s.record(human(A))) // 6
  await settle(1000)
  expect([count(s, B), gap(s, B)]).toEqual([2, false])
  clock.advance(1)
  must(s.record(human(A))) // 7
  await waitFor(() => gap(s, B), 'the hourly prune')
  expect(count(s, B)).toBe(0)
})

test('any prune restarts the hour', async () => {
  const file = fx.file()
  const clock = new Clock(T0 + RETENTION + 1)
  const s = fx.open(file, { clock: clock.fn })
  clock.advance(10 * MINUTE)
  expect(s.prune()).toStrictEqual({ eventsDeleted: 0, cursorsDeleted: 0 })
  writeAt(file, T0, B, 1) // 1
  clock.advance(HOUR)
  must(s.record(human(A))) // 2: an hour, not more, since prune()
  await settle(1000)
  expect([count(s, B), gap(s, B)]).toEqual([1, false])
  clock.advance(1)
  must(s.record(human(A))) // 3
  await waitFor(() => gap(s, B), 'the prune after the hour')
})

test('prune(): all but the newest maxEvents, oldest first, watermarks per session', () => {
  const file = fx.file()
  writeAt(file, T0, A, 2) // 1, 2
  writeAt(file, T0, B, 2) // 3, 4
  writeAt(file, T0, C, 2) // 5, 6
  const s = fx.open(file, { clock: () => T0, maxEvents: 3 })
  expect(s.prune()).toStrictEqual({ eventsDeleted: 3, cursorsDeleted: 0 })
  expect(s.changesSince(A, 0).stateChanges).toMatchObject({ events: [], historyGap: true, earliestAvailableSequence: 3 })
  expect(s.changesSince(B, 0).stateChanges).toMatchObject({ historyGap: true, earliestAvailableSequence: 4 })
  expect(s.changesSince(B, 3).stateChanges.historyGap).toBe(false)
  expect(s.changesSince(C, 0).stateChanges).toMatchObject({ historyGap: false, earliestAvailableSequence: 5 })
})

test('prune(): more than one batch of old events, all of them', () => {
  const file = fx.file()
  const w = fx.open(file, { clock: () => T0 })
  for (let i = 0; i < 2100; i++) must(w.record({ sessionKey: i % 2 ? A : B, kind: 'created', actorType: 'system', summary: 's' }))
  w.close()
  const s = fx.open(file, { clock: () => T0 + RETENTION + 1 })
  expect(s.prune()).toStrictEqual({ eventsDeleted: 2100, cursorsDeleted: 0 })
  expect(s.changesSince(A, 2099).stateChanges.historyGap).toBe(true)
  expect(s.changesSince(A, 2100).stateChanges.historyGap).toBe(false)
  expect(s.changesSince(B, 2098).stateChanges.historyGap).toBe(true)
  expect(s.changesSince(B, 2099).stateChanges.historyGap).toBe(false)
})

test('cursor expiry: not updated within retentionMs; a watch, a material update or an acknowledge refreshes', () => {
  const file = fx.file()
  const clock = new Clock()
  const s = fx.open(file, { clock: clock.fn })
  const W = ['agent:main:w1', 'agent:main:w2', 'agent:main:w3', 'agent:main:w4']
  for (const w of W) s.watch(w, A) // all at T0
  clock.advance(10 * MINUTE)
  s.watch(W[0], A) // re-watch refreshes
  s.watch(W[1], B)
  must(s.record(human(B))) // material update of w2/B only
  s.watch(W[2], C)
  must(s.record(human(C)))
  clock.advance(10 * MINUTE)
  expect(s.acknowledge(W[2], [C])).toBe(1) // refreshes w3/C
  clock.advance(RETENTION - 10 * MINUTE)
  // Exactly retentionMs after T0 + 10 min: nothing has expired yet except the T0 cursors.
  expect(s.prune()).toStrictEqual({ eventsDeleted: 0, cursorsDeleted: 3 })
  expect(W.map((w) => cursorRow(file, w, A) !== undefined)).toEqual([true, false, false, false])
  expect(cursorRow(file, W[1], B)).toEqual({ l: 0, n: 1, m: 1, provenance: 'explicit' })
  clock.advance(1)
  expect(s.prune()).toStrictEqual({ eventsDeleted: 2, cursorsDeleted: 2 })
  expect(cursorRow(file, W[0], A)).toBeUndefined()
  expect(cursorRow(file, W[1], B)).toBeUndefined()
  expect(cursorRow(file, W[2], C)).toEqual({ l: 2, n: 2, m: 2, provenance: 'explicit' })
  expect(s.peek(W[1])).toEqual([])
  clock.advance(10 * MINUTE)
  expect(s.prune()).toStrictEqual({ eventsDeleted: 0, cursorsDeleted: 1 })
})
