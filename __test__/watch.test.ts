// Watchers (semantics.md#recording-fan-out, semantics.md#cursors): seeding, the material update, self-suppression, provenance,
// unwatch and acknowledge, seen through notices and the cursor rows (L, N, M).
import { codeOf, cursorRow, fixture, human, must, spawn } from './helpers'

const fx = fixture('watch')
const PARENT = 'agent:main:main'
const CHILD = 'agent:main:subagent:c'
const OTHER = 'agent:main:subagent:d'

describe('seeding', () => {
  test('a spawn edge seeds the producer-named watcher at the spawn: L = N = M = S, no notice', () => {
    const file = fx.file()
    const s = fx.open(file)
    must(s.record({ sessionKey: CHILD, kind: 'created', actorType: 'system', summary: 'c' })) // 1
    const sp = must(s.record(spawn(CHILD, PARENT))) // 2
    expect(sp.sequence).toBe(2)
    expect(cursorRow(file, PARENT, CHILD)).toEqual({ l: 2, n: 2, m: 2, provenance: 'explicit' })
    expect(s.peek(PARENT)).toEqual([])
    const msg = must(s.record(human(CHILD))) // 3
    expect(cursorRow(file, PARENT, CHILD)).toEqual({ l: 2, n: 3, m: 3, provenance: 'explicit' })
    expect(s.peek(PARENT).map((n) => [n.targetKey, n.changesSince])).toEqual([[CHILD, 2]])
    expect(msg.sequence).toBe(3)
  })

  test('a spawn drops bare watchers and the target itself', () => {
    const file = fx.file()
    const s = fx.open(file)
    must(s.record({ ...spawn(CHILD, PARENT), watchers: ['global', 'agent:MAIN:x', CHILD, PARENT, PARENT] }))
    const db = cursorRow(file, PARENT, CHILD)
    expect(db).toEqual({ l: 1, n: 1, m: 1, provenance: 'explicit' })
    expect(cursorRow(file, CHILD, CHILD)).toBeUndefined()
    expect(cursorRow(file, 'global', CHILD)).toBeUndefined()
  })

  test('a spawn of a bare target seeds nothing', () => {
    const file = fx.file()
    const s = fx.open(file)
    must(s.record(spawn('global', PARENT)))
    expect(cursorRow(file, PARENT, 'global')).toBeUndefined()
    must(s.record(human('global')))
    expect(s.peek(PARENT)).toEqual([])
  })

  test('a re-seed by a later spawn drops the pending notice', () => {
    const file = fx.file()
    const s = fx.open(file)
    must(s.record(spawn(CHILD, PARENT))) // 1
    must(s.record(human(CHILD))) // 2
    expect(s.peek(PARENT)).toHaveLength(1)
    must(s.record(spawn(CHILD, PARENT))) // 3
    expect(cursorRow(file, PARENT, CHILD)).toEqual({ l: 3, n: 3, m: 3, provenance: 'explicit' })
    expect(s.peek(PARENT)).toEqual([])
    expect(s.drain(PARENT)).toEqual([])
  })

  test('watch seeds at the target’s head, so earlier history never notifies', () => {
    const file = fx.file()
    const s = fx.open(file)
    must(s.record(human(CHILD))) // 1
    must(s.record(human(CHILD))) // 2
    expect(s.watch(PARENT, CHILD)).toBe(true)
    expect(cursorRow(file, PARENT, CHILD)).toEqual({ l: 2, n: 2, m: 2, provenance: 'explicit' })
    expect(s.watch(PARENT, OTHER)).toBe(true)
    expect(cursorRow(file, PARENT, OTHER)).toEqual({ l: 0, n: 0, m: 0, provenance: 'explicit' })
    expect(s.peek(PARENT)).toEqual([])
    must(s.record(human(CHILD))) // 3
    expect(s.drain(PARENT).map((n) => n.changesSince)).toEqual([2])
  })

  test('a producer-named watcher without a cursor gets L = 0, N = M = S on a notify kind', () => {
    const file = fx.file()
    const s = fx.open(file)
    must(s.record({ sessionKey: CHILD, kind: 'created', actorType: 'system', summary: 'c' })) // 1
    must(s.record({ ...human(CHILD), watchers: [PARENT] })) // 2
    expect(cursorRow(file, PARENT, CHILD)).toEqual({ l: 0, n: 2, m: 2, provenance: 'explicit' })
    expect(s.peek(PARENT).map((n) => n.changesSince)).toEqual([0])
    // A log-only kind names no watcher into existence.
    must(s.record({ sessionKey: OTHER, kind: 'run_completed', actorType: 'agent', summary: 'r', watchers: [PARENT] }))
    expect(cursorRow(file, PARENT, OTHER)).toBeUndefined()
  })
})

describe('watch', () => {
  test('refuses bare keys and watcher == target with false; throws on empty keys or a bad provenance', () => {
    const file = fx.file()
    const s = fx.open(file)
    expect(s.watch('global', CHILD)).toBe(false)
    expect(s.watch(PARENT, 'global')).toBe(false)
    expect(s.watch('main', 'agent:main:x')).toBe(false)
    expect(s.watch('agent:MAIN:x', CHILD)).toBe(false)
    expect(s.watch(PARENT, 'agent:main:')).toBe(false)
    expect(s.watch(PARENT, PARENT)).toBe(false)
    expect(codeOf(() => s.watch('', CHILD))).toBe('ERR_INVALID_ARG')
    expect(codeOf(() => s.watch(PARENT, ''))).toBe('ERR_INVALID_ARG')
    expect(codeOf(() => s.watch(PARENT, CHILD, { provenance: 'implicit' as never }))).toBe('ERR_INVALID_ARG')
    const db = cursorRow(file, 'global', CHILD) ?? cursorRow(file, PARENT, 'global') ?? cursorRow(file, PARENT, PARENT)
    expect(db).toBeUndefined()
    expect(s.drain('global')).toEqual([])
  })

  test('watch on an existing cursor returns true and changes nothing of L, N, M', () => {
    const file = fx.file()
    const s = fx.open(file)
    expect(s.watch(PARENT, CHILD)).toBe(true)
    must(s.record(human(CHILD))) // 1
    must(s.record(human(CHILD))) // 2
    expect(cursorRow(file, PARENT, CHILD)).toEqual({ l: 0, n: 1, m: 2, provenance: 'explicit' })
    expect(s.watch(PARENT, CHILD)).toBe(true)
    expect(s.watch(PARENT, CHILD, { provenance: 'ambient-group' })).toBe(true)
    expect(cursorRow(file, PARENT, CHILD)).toEqual({ l: 0, n: 1, m: 2, provenance: 'explicit' })
    expect(s.drain(PARENT).map((n) => n.changesSince)).toEqual([0])
    expect(s.drain(PARENT).map((n) => n.changesSince)).toEqual([1])
    expect(s.drain(PARENT)).toEqual([])
  })

  test('ambient-group is promoted to explicit by a later watch, never the reverse', () => {
    const file = fx.file()
    const s = fx.open(file)
    expect(s.watch(PARENT, CHILD, { provenance: 'ambient-group' })).toBe(true)
    expect(cursorRow(file, PARENT, CHILD)?.provenance).toBe('ambient-group')
    expect(s.watch(PARENT, CHILD, { provenance: 'ambient-group' })).toBe(true)
    expect(cursorRow(file, PARENT, CHILD)?.provenance).toBe('ambient-group')
    expect(s.watch(PARENT, CHILD)).toBe(true)
    expect(cursorRow(file, PARENT, CHILD)?.provenance).toBe('explicit')
    expect(s.watch(PARENT, CHILD, { provenance: 'ambient-group' })).toBe(true)
    expect(cursorRow(file, PARENT, CHILD)?.provenance).toBe('explicit')
  })

  test('a spawn keeps the provenance of an existing cursor', () => {
    const file = fx.file()
    const s = fx.open(file)
    s.watch(PARENT, CHILD, { provenance: 'ambient-group' })
    must(s.record(spawn(CHILD, PARENT)))
    expect(cursorRow(file, PARENT, CHILD)).toEqual({ l: 1, n: 1, m: 1, provenance: 'ambient-group' })
  })
})

describe('the material update', () => {
  test('only notify kinds touch cursors; log-only kinds never open a notice', () => {
    const file = fx.file()
    const s = fx.open(file)
    s.watch(PARENT, CHILD)
    for (const kind of ['run_completed', 'run_failed', 'compacted', 'adopted', 'created'] as const) {
      must(s.record({ sessionKey: CHILD, kind, actorType: 'agent', summary: kind }))
    }
    expect(cursorRow(file, PARENT, CHILD)).toEqual({ l: 0, n: 0, m: 0, provenance: 'explicit' })
    expect(s.peek(PARENT)).toEqual([])
    for (const kind of ['human_direct_message', 'goal_changed', 'upstream_missing'] as const) {
      must(s.record({ sessionKey: CHILD, kind, actorType: 'human', summary: kind }))
    }
    expect(cursorRow(file, PARENT, CHILD)).toEqual({ l: 0, n: 6, m: 8, provenance: 'explicit' })
    expect(s.peek(PARENT).map((n) => n.changesSince)).toEqual([0])
  })

  test('self-suppression: the watcher that caused the event is not touched, others are', () => {
    const file = fx.file()
    const s = fx.open(file)
    s.watch(PARENT, CHILD)
    s.watch(OTHER, CHILD)
    must(s.record(human(CHILD, { actorType: 'agent', actorId: PARENT }))) // 1
    expect(cursorRow(file, PARENT, CHILD)).toEqual({ l: 0, n: 0, m: 0, provenance: 'explicit' })
    expect(cursorRow(file, OTHER, CHILD)).toEqual({ l: 0, n: 1, m: 1, provenance: 'explicit' })
    expect(s.peek(PARENT)).toEqual([])
    expect(s.peek(OTHER).map((n) => n.changesSince)).toEqual([0])
    // A producer-named watcher equal to the actor gets no cursor either.
    const third = 'agent:main:third'
    must(s.record(human(CHILD, { actorType: 'agent', actorId: third, watchers: [third] }))) // 2
    expect(cursorRow(file, third, CHILD)).toBeUndefined()
    expect(s.unwatch(third, CHILD)).toBe(false)
  })

  test('a bare target notifies nobody, even a named watcher', () => {
    const file = fx.file()
    const s = fx.open(file)
    must(s.record(human('global', { watchers: [PARENT] })))
    expect(cursorRow(file, PARENT, 'global')).toBeUndefined()
    expect(s.peek(PARENT)).toEqual([])
  })
})

describe('unwatch', () => {
  test('removes the cursor and its pending notice; false when there was none', () => {
    const file = fx.file()
    const s = fx.open(file)
    s.watch(PARENT, CHILD)
    s.watch(PARENT, OTHER)
    must(s.record(human(CHILD)))
    must(s.record(human(OTHER)))
    expect(s.peek(PARENT).map((n) => n.targetKey)).toEqual([CHILD, OTHER])
    expect(s.unwatch(PARENT, CHILD)).toBe(true)
    expect(cursorRow(file, PARENT, CHILD)).toBeUndefined()
    expect(s.peek(PARENT).map((n) => n.targetKey)).toEqual([OTHER])
    expect(s.unwatch(PARENT, CHILD)).toBe(false)
    expect(s.unwatch('global', CHILD)).toBe(false)
    expect(codeOf(() => s.unwatch('', CHILD))).toBe('ERR_INVALID_ARG')
    // A later event opens a notice only for the cursor that is left.
    must(s.record(human(CHILD)))
    expect(s.drain(PARENT).map((n) => n.targetKey)).toEqual([OTHER])
  })
})

describe('acknowledge', () => {
  test('counts pending notices acknowledged; a repeated target once, non-pending 0', () => {
    const file = fx.file()
    const s = fx.open(file)
    const T3 = 'agent:main:subagent:e'
    s.watch(PARENT, CHILD)
    s.watch(PARENT, OTHER)
    s.watch(PARENT, T3)
    must(s.record(human(CHILD))) // 1
    must(s.record(human(OTHER))) // 2
    expect(s.acknowledge(PARENT, [CHILD, CHILD, T3, 'agent:main:nobody', 'global'])).toBe(1)
    expect(s.peek(PARENT).map((n) => n.targetKey)).toEqual([OTHER])
    expect(cursorRow(file, PARENT, CHILD)).toEqual({ l: 1, n: 1, m: 1, provenance: 'explicit' })
    expect(s.acknowledge(PARENT, [CHILD])).toBe(0)
    expect(s.acknowledge(PARENT, [])).toBe(0)
    expect(s.acknowledge(PARENT, [OTHER, OTHER, CHILD])).toBe(1)
    expect(s.peek(PARENT)).toEqual([])
    expect(s.acknowledge('agent:main:nobody', [CHILD])).toBe(0)
    expect(codeOf(() => s.acknowledge('', [CHILD]))).toBe('ERR_INVALID_ARG')
  })

  test('an acknowledge after more material events reopens exactly one notice at old N', () => {
    const file = fx.file()
    const s = fx.open(file)
    s.watch(PARENT, CHILD)
    must(s.record(human(CHILD))) // 1
    must(s.record(human(CHILD))) // 2
    must(s.record(human(CHILD))) // 3
    expect(s.acknowledge(PARENT, [CHILD])).toBe(1)
    expect(cursorRow(file, PARENT, CHILD)).toEqual({ l: 1, n: 3, m: 3, provenance: 'explicit' })
    expect(s.peek(PARENT).map((n) => n.changesSince)).toEqual([1])
    expect(s.acknowledge(PARENT, [CHILD, CHILD])).toBe(1)
    expect(cursorRow(file, PARENT, CHILD)).toEqual({ l: 3, n: 3, m: 3, provenance: 'explicit' })
    expect(s.peek(PARENT)).toEqual([])
    expect(s.acknowledge(PARENT, [CHILD])).toBe(0)
  })
})
