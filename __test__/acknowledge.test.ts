// The reconciling acknowledge (semantics.md#cursors-acknowledge): the README's pattern (drain
// at the turn's start, changesSince from the notice, acknowledge through the last sequence
// read) gives one notice and one wake per burst; without `through`, the seeds' reopen stays.
import { codeOf, fixture, human, must, settle, spawn, waitFor, wakeSink, type SessionState } from './helpers'

const fx = fixture('ack')
const MAIN = 'agent:main:main'
const CHILD = 'agent:main:subagent:research'

function lnm(s: SessionState): [number, number, number] {
  const [row] = s.cursorRows({ watcherKey: MAIN, targetKey: CHILD })
  return [row.lastSeen, row.notified, row.material]
}

/** A spawn (1) and three quick messages (2, 3, 4), then the one wake they make due. */
async function burst(s: SessionState, sink: ReturnType<typeof wakeSink>): Promise<void> {
  expect(must(s.record(spawn(CHILD, MAIN))).sequence).toBe(1)
  expect(lnm(s)).toEqual([1, 1, 1])
  for (let i = 0; i < 3; i++) must(s.record(human(CHILD)))
  expect(lnm(s)).toEqual([1, 2, 4])
  await waitFor(() => sink.wakes.length === 1, 'the wake of the burst')
  expect(sink.calls()).toEqual([[MAIN, `session-state:${CHILD}`]])
}

describe('one notice and one wake per burst', () => {
  test("the README's pattern: drain, changesSince, acknowledge through", async () => {
    const sink = wakeSink()
    const s = fx.open(fx.file(), { wake: sink.wake, wakeCoalesceMs: 50 })
    await burst(s, sink)
    const handed = []
    // The turn the wake started.
    for (const notice of s.drain(MAIN)) {
      handed.push(notice)
      expect(lnm(s)).toEqual([2, 4, 4]) // the seeds' reopen: a notice from 2 is queued
      expect(s.peek(MAIN).map((n) => n.changesSince)).toEqual([2])
      const { stateChanges } = s.changesSince(notice.targetKey, notice.changesSince)
      expect(stateChanges.events.map((e) => e.sequence)).toEqual([2, 3, 4])
      const read = must(stateChanges.events.at(-1)).sequence
      expect(s.acknowledge(MAIN, [notice.targetKey], { through: read })).toBe(1)
      expect(lnm(s)).toEqual([4, 4, 4])
    }
    expect(handed.map((n) => [n.targetKey, n.changesSince])).toEqual([[CHILD, 1]])
    expect(s.peek(MAIN)).toEqual([])
    await settle()
    expect(s.drain(MAIN)).toEqual([])
    expect(sink.wakes).toHaveLength(1)
    // A later event opens a fresh notice as usual, and wakes.
    expect(must(s.record(human(CHILD))).sequence).toBe(5)
    expect(lnm(s)).toEqual([4, 5, 5])
    await waitFor(() => sink.wakes.length === 2, 'the wake of the next change')
    expect(s.drain(MAIN).map((n) => n.changesSince)).toEqual([4])
  })

  test('the same with the Promise API: drainAsync, changesSinceAsync, acknowledgeAsync', async () => {
    const sink = wakeSink()
    const s = fx.open(fx.file(), { wake: sink.wake, wakeCoalesceMs: 50 })
    await burst(s, sink)
    const notices = await s.drainAsync(MAIN)
    expect(notices.map((n) => n.changesSince)).toEqual([1])
    const { stateChanges } = await s.changesSinceAsync(CHILD, notices[0].changesSince)
    const read = must(stateChanges.events.at(-1)).sequence
    expect(read).toBe(4)
    expect(await s.acknowledgeAsync(MAIN, [CHILD], { through: read })).toBe(1)
    expect(lnm(s)).toEqual([4, 4, 4])
    await settle()
    expect(await s.drainAsync(MAIN)).toEqual([])
    expect(sink.wakes).toHaveLength(1)
  })

  test('without through, the drained notice reopens: two notices and two wakes', async () => {
    const sink = wakeSink()
    const s = fx.open(fx.file(), { wake: sink.wake, wakeCoalesceMs: 50 })
    await burst(s, sink)
    const first = s.drain(MAIN)
    expect(first.map((n) => n.changesSince)).toEqual([1])
    expect(s.changesSince(CHILD, 1).stateChanges.events.map((e) => e.sequence)).toEqual([2, 3, 4])
    expect(lnm(s)).toEqual([2, 4, 4])
    await waitFor(() => sink.wakes.length === 2, 'the second wake')
    const second = s.drain(MAIN)
    expect(second.map((n) => n.changesSince)).toEqual([2])
    expect(lnm(s)).toEqual([4, 4, 4])
    await settle()
    expect(sink.wakes).toHaveLength(2)
  })
})

describe('acknowledge through', () => {
  test('a partial read names through; a read at or below L changes nothing', () => {
    const s = fx.open(fx.file())
    must(s.record(spawn(CHILD, MAIN)))
    for (let i = 0; i < 3; i++) must(s.record(human(CHILD)))
    expect(lnm(s)).toEqual([1, 2, 4])
    expect(s.acknowledge(MAIN, [CHILD], { through: 3 })).toBe(1)
    expect(lnm(s)).toEqual([3, 4, 4])
    expect(s.peek(MAIN).map((n) => n.text)).toEqual([
      'Session "agent:main:subagent:research" changed (other actor). Reconcile before acting: ' +
        'session_status sessionKey "agent:main:subagent:research" changesSince 3.',
    ])
    expect(s.acknowledge(MAIN, [CHILD], { through: 3 })).toBe(0)
    expect(s.acknowledge(MAIN, [CHILD], { through: 0 })).toBe(0)
    expect(lnm(s)).toEqual([3, 4, 4])
    expect(s.acknowledge(MAIN, [CHILD, CHILD], { through: 4 })).toBe(1)
    expect(lnm(s)).toEqual([4, 4, 4])
    expect(s.peek(MAIN)).toEqual([])
  })

  test('through must be a non-negative safe integer; a bad one changes nothing', async () => {
    const s = fx.open(fx.file())
    must(s.record(spawn(CHILD, MAIN)))
    must(s.record(human(CHILD)))
    const bad: unknown[] = [-1, 1.5, Number.NaN, Infinity, 2 ** 53, '2']
    for (const through of bad) {
      const options = { through } as unknown as { through: number }
      expect(codeOf(() => s.acknowledge(MAIN, [CHILD], options))).toBe('ERR_INVALID_ARG')
      await expect(s.acknowledgeAsync(MAIN, [CHILD], options)).rejects.toMatchObject({ code: 'ERR_INVALID_ARG' })
    }
    expect(lnm(s)).toEqual([1, 2, 2])
    expect(s.peek(MAIN).map((n) => n.changesSince)).toEqual([1])
    expect(s.acknowledge(MAIN, [CHILD], { through: 2 ** 53 - 1 })).toBe(1)
    expect(lnm(s)).toEqual([2, 2, 2])
  })

  test('with scope, only the cursors bound to it', () => {
    const s = fx.open(fx.file())
    s.watch(MAIN, CHILD, { scope: '/stores/a' })
    must(s.record(human(CHILD))) // 1
    expect(s.acknowledge(MAIN, [CHILD], { scope: '/stores/b', through: 1 })).toBe(0)
    expect(lnm(s)).toEqual([0, 1, 1])
    expect(s.acknowledge(MAIN, [CHILD], { scope: '/stores/a', through: 1 })).toBe(1)
    expect(lnm(s)).toEqual([1, 1, 1])
  })
})
