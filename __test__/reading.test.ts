// Reading (semantics.md#reading): stateVersion(s), changesSince with its limit, `after`, truncation, the earliest
// available sequence and the exact historyGap watermark.
import { Clock, DAY, RETENTION, T0, codeOf, fixture, human, must, rawDb, type SessionState } from './helpers'

const fx = fixture('reading')
const A = 'agent:main:subagent:a'
const B = 'agent:main:subagent:b'

function seqs(s: SessionState, key: string, after: number, options?: { agentId?: string; limit?: number }) {
  return s.changesSince(key, after, options).stateChanges.events.map((e) => e.sequence)
}

/** Records `n` log-only events on `key`; returns their sequences. */
function fill(s: SessionState, key: string, n: number): number[] {
  const out: number[] = []
  for (let i = 0; i < n; i++) {
    out.push(must(s.record({ sessionKey: key, kind: 'run_completed', actorType: 'agent', summary: `run ${i}` })).sequence)
  }
  return out
}

describe('stateVersion and stateVersions', () => {
  test('the largest sequence of the session, 0 when none; stateVersions keeps order and drops zeros', () => {
    const s = fx.open(fx.file())
    expect(s.stateVersion(A)).toBe(0)
    fill(s, A, 2) // 1, 2
    fill(s, B, 1) // 3
    fill(s, A, 1) // 4
    must(s.record({ sessionKey: 'global', agentId: 'ops', kind: 'created', actorType: 'system', summary: 'g' })) // 5
    expect(s.stateVersion(A)).toBe(4)
    expect(s.stateVersion(B)).toBe(3)
    expect(s.stateVersion('global')).toBe(0)
    expect(s.stateVersion('global', { agentId: 'ops' })).toBe(5)
    expect(
      s.stateVersions([
        { sessionKey: B },
        { sessionKey: 'agent:main:nobody' },
        { sessionKey: A },
        { sessionKey: 'global' },
        { sessionKey: 'global', agentId: 'ops' },
      ]),
    ).toStrictEqual([
      { sessionKey: B, agentId: 'main', stateVersion: 3 },
      { sessionKey: A, agentId: 'main', stateVersion: 4 },
      { sessionKey: 'global', agentId: 'ops', stateVersion: 5 },
    ])
    expect(s.stateVersions([])).toEqual([])
  })

  test('bad keys and agents throw ERR_INVALID_ARG', () => {
    const s = fx.open(fx.file())
    expect(codeOf(() => s.stateVersion(''))).toBe('ERR_INVALID_ARG')
    expect(codeOf(() => s.stateVersion('agent:ops:x', { agentId: 'main' }))).toBe('ERR_INVALID_ARG')
    expect(codeOf(() => s.stateVersion('global', { agentId: 'OPS' }))).toBe('ERR_INVALID_ARG')
    expect(codeOf(() => s.stateVersions([{ sessionKey: A }, { sessionKey: '' }]))).toBe('ERR_INVALID_ARG')
    expect(codeOf(() => s.changesSince('', 0))).toBe('ERR_INVALID_ARG')
    expect(codeOf(() => s.changesSince('agent:ops:x', 0, { agentId: 'main' }))).toBe('ERR_INVALID_ARG')
  })
})

describe('changesSince', () => {
  test('the session’s events after `after`, ascending, with its state version; no cursor moves', () => {
    const s = fx.open(fx.file())
    const watcher = 'agent:main:main'
    s.watch(watcher, A)
    must(s.record(human(A))) // 1
    fill(s, B, 1) // 2
    must(s.record(human(A))) // 3
    const res = s.changesSince(A, 0)
    expect(res.stateVersion).toBe(3)
    expect(res.stateChanges.events.map((e) => [e.sequence, e.sessionKey])).toEqual([
      [1, A],
      [3, A],
    ])
    expect(res.stateChanges).toMatchObject({ truncated: false, earliestAvailableSequence: 1, historyGap: false })
    expect(seqs(s, A, 1)).toEqual([3])
    expect(seqs(s, A, 3)).toEqual([])
    expect(seqs(s, A, 1000)).toEqual([])
    expect(s.changesSince(A, 1000).stateVersion).toBe(3)
    // Reading is not acknowledging.
    expect(s.peek(watcher).map((n) => n.changesSince)).toEqual([0])
    expect(s.drain(watcher).map((n) => n.changesSince)).toEqual([0])
  })

  test('limit is floored and clamped to [1, 200], default 200; truncated when more exist', () => {
    const s = fx.open(fx.file())
    const all = fill(s, A, 205)
    expect(all[204]).toBe(205)
    const page = (limit?: number) => {
      const c = s.changesSince(A, 0, limit === undefined ? undefined : { limit }).stateChanges
      return [c.events.length, c.events[0]?.sequence, c.events.at(-1)?.sequence, c.truncated]
    }
    expect(page()).toEqual([200, 1, 200, true])
    expect(page(0)).toEqual([1, 1, 1, true])
    expect(page(-5)).toEqual([1, 1, 1, true])
    expect(page(0.2)).toEqual([1, 1, 1, true])
    expect(page(2.9)).toEqual([2, 1, 2, true])
    expect(page(1e9)).toEqual([200, 1, 200, true])
    expect(page(200)).toEqual([200, 1, 200, true])
    expect(page(205)).toEqual([200, 1, 200, true])
    const tail = s.changesSince(A, 200, { limit: 5 }).stateChanges
    expect([tail.events.map((e) => e.sequence), tail.truncated]).toEqual([[201, 202, 203, 204, 205], false])
    const almost = s.changesSince(A, 199, { limit: 5 }).stateChanges
    expect([almost.events.length, almost.truncated]).toEqual([5, true])
  })

  test.each([NaN, Infinity, -Infinity])('limit %p is ERR_INVALID_ARG', (limit) => {
    const s = fx.open(fx.file())
    fill(s, A, 1)
    expect(codeOf(() => s.changesSince(A, 0, { limit }))).toBe('ERR_INVALID_ARG')
  })

  test.each([-1, 0.5, 2 ** 53, NaN, Infinity, -0.5])('after %p is ERR_INVALID_ARG', (after) => {
    const s = fx.open(fx.file())
    fill(s, A, 1)
    expect(codeOf(() => s.changesSince(A, after))).toBe('ERR_INVALID_ARG')
  })

  test('after 2^53 - 1 is accepted', () => {
    const s = fx.open(fx.file())
    fill(s, A, 1)
    expect(s.changesSince(A, 2 ** 53 - 1)).toStrictEqual({
      stateVersion: 1,
      stateChanges: { events: [], truncated: false, earliestAvailableSequence: 1, historyGap: false },
    })
  })
})

describe('earliestAvailableSequence', () => {
  test('0 for a session never recorded', () => {
    const s = fx.open(fx.file())
    fill(s, B, 2)
    expect(s.changesSince(A, 0)).toStrictEqual({
      stateVersion: 0,
      stateChanges: { events: [], truncated: false, earliestAvailableSequence: 0, historyGap: false },
    })
  })

  test('the smallest retained sequence of the session (not of the log)', () => {
    const s = fx.open(fx.file())
    fill(s, B, 2) // 1, 2
    fill(s, A, 2) // 3, 4
    expect(s.changesSince(A, 3).stateChanges.earliestAvailableSequence).toBe(3)
    expect(s.changesSince(B, 0).stateChanges.earliestAvailableSequence).toBe(1)
  })

  test('head + 1 when the session has a head but no retained events', () => {
    const file = fx.file()
    const writer = fx.open(file)
    fill(writer, A, 3) // 1..3
    fill(writer, B, 1) // 4
    writer.close()
    const s = fx.open(file, { maxEvents: 1 })
    expect(s.prune()).toStrictEqual({ eventsDeleted: 3, cursorsDeleted: 0 })
    expect(s.changesSince(A, 0)).toStrictEqual({
      stateVersion: 3,
      stateChanges: { events: [], truncated: false, earliestAvailableSequence: 4, historyGap: true },
    })
    expect(s.changesSince(B, 0).stateChanges.earliestAvailableSequence).toBe(4)
  })
})

describe('historyGap', () => {
  test('exact from the per-session watermark after a maxEvents prune', () => {
    const file = fx.file()
    const writer = fx.open(file)
    fill(writer, A, 2) // 1, 2
    fill(writer, B, 1) // 3
    fill(writer, A, 1) // 4
    fill(writer, B, 1) // 5
    writer.close()
    // Opening never prunes: everything is still there.
    const s = fx.open(file, { maxEvents: 2 })
    expect(seqs(s, A, 0)).toEqual([1, 2, 4])
    expect(s.changesSince(A, 0).stateChanges.historyGap).toBe(false)
    expect(s.prune()).toStrictEqual({ eventsDeleted: 3, cursorsDeleted: 0 })
    const gap = (key: string, after: number) => s.changesSince(key, after).stateChanges.historyGap
    // A lost 1 and 2; B lost 3.
    expect([gap(A, 0), gap(A, 1), gap(A, 2), gap(A, 3), gap(A, 4)]).toEqual([true, true, false, false, false])
    expect([gap(B, 0), gap(B, 2), gap(B, 3), gap(B, 5)]).toEqual([true, true, false, false])
    expect(s.changesSince(A, 0).stateChanges).toStrictEqual({
      events: [expect.objectContaining({ sequence: 4 })],
      truncated: false,
      earliestAvailableSequence: 4,
      historyGap: true,
    })
    // Heads are never pruned.
    expect([s.stateVersion(A), s.stateVersion(B)]).toEqual([4, 5])
    // A second prune has nothing left to do and lowers no watermark.
    expect(s.prune()).toStrictEqual({ eventsDeleted: 0, cursorsDeleted: 0 })
    expect(gap(A, 1)).toBe(true)
  })

  test('exact after an age prune: retentionMs + 1 ms later, not at retentionMs', () => {
    const file = fx.file()
    const clock = new Clock()
    const writer = fx.open(file, { clock: clock.fn })
    fill(writer, A, 2) // 1, 2 at T0
    clock.advance(1000)
    fill(writer, A, 1) // 3 at T0 + 1 s
    writer.close()
    const later = new Clock(T0 + RETENTION)
    const s = fx.open(file, { clock: later.fn })
    expect(s.prune()).toStrictEqual({ eventsDeleted: 0, cursorsDeleted: 0 })
    expect(s.changesSince(A, 0).stateChanges.historyGap).toBe(false)
    later.advance(1)
    expect(s.prune()).toStrictEqual({ eventsDeleted: 2, cursorsDeleted: 0 })
    expect(s.changesSince(A, 0).stateChanges).toStrictEqual({
      events: [expect.objectContaining({ sequence: 3, occurredAt: T0 + 1000 })],
      truncated: false,
      earliestAvailableSequence: 3,
      historyGap: true,
    })
    expect(s.changesSince(A, 1).stateChanges.historyGap).toBe(true)
    expect(s.changesSince(A, 2).stateChanges.historyGap).toBe(false)
    later.advance(1000)
    expect(s.prune().eventsDeleted).toBe(1)
    expect(s.changesSince(A, 2).stateChanges).toStrictEqual({
      events: [],
      truncated: false,
      earliestAvailableSequence: 4,
      historyGap: true,
    })
    expect(s.changesSince(A, 3).stateChanges.historyGap).toBe(false)
    expect(s.stateVersion(A)).toBe(3)
  })

  test('a row deleted by hand is not a gap', () => {
    const file = fx.file()
    const writer = fx.open(file)
    fill(writer, A, 3)
    writer.close()
    // Another program deletes rows; better-sqlite3 runs while no store of this process is open.
    const db = rawDb(file)
    expect(db.prepare('DELETE FROM session_state_events WHERE sequence IN (1, 2)').run().changes).toBe(2)
    db.close()
    const s = fx.open(file)
    expect(s.changesSince(A, 0).stateChanges).toStrictEqual({
      events: [expect.objectContaining({ sequence: 3 })],
      truncated: false,
      earliestAvailableSequence: 3,
      historyGap: false,
    })
  })

  test('an age prune judges occurredAt, not the time of recording', () => {
    const file = fx.file()
    const clock = new Clock()
    const writer = fx.open(file, { clock: clock.fn })
    must(writer.record({ ...human(A), occurredAt: T0 - DAY })) // 1, a day old when recorded
    must(writer.record(human(A))) // 2
    writer.close()
    const s = fx.open(file, { clock: () => T0 - DAY + RETENTION + 1 })
    expect(s.prune().eventsDeleted).toBe(1)
    expect(seqs(s, A, 0)).toEqual([2])
  })
})
