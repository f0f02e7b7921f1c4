// record (semantics.md#api, semantics.md#recording): the StateEvent shape, normalisation of the input, and its error reporting.
import { spawnSync } from 'node:child_process'
import * as path from 'node:path'
import { types } from 'node:util'

import { Clock, DAY, T0, errorSink, fixture, human, must, sql } from './helpers'

const fx = fixture('record')
const CHILD = 'agent:main:subagent:c'
const PARENT = 'agent:main:main'

describe('the StateEvent shape', () => {
  test('absent optionals are omitted, never null or undefined-valued', () => {
    const clock = new Clock()
    const s = fx.open(fx.file(), { clock: clock.fn })
    const ev = must(s.record({ sessionKey: CHILD, kind: 'created', actorType: 'system', summary: 'made' }))
    expect(ev).toStrictEqual({
      sequence: 1,
      sessionKey: CHILD,
      agentId: 'main',
      kind: 'created',
      actorType: 'system',
      occurredAt: T0,
      summary: 'made',
    })
    for (const k of ['actorId', 'runId', 'sessionId', 'payload']) expect(k in ev).toBe(false)
    const [read] = s.changesSince(CHILD, 0).stateChanges.events
    expect(read).toStrictEqual(ev)
    for (const k of ['actorId', 'runId', 'sessionId', 'payload']) expect(k in read).toBe(false)
  })

  test('every optional given comes back, from record and from changesSince', () => {
    const clock = new Clock()
    const s = fx.open(fx.file(), { clock: clock.fn })
    const ev = must(
      s.record({
        sessionKey: 'agent:ops:worker',
        agentId: 'ops',
        sessionId: 'sess-1',
        kind: 'run_completed',
        actorType: 'agent',
        actorId: 'agent:ops:worker',
        runId: 'run-9',
        summary: 'done',
        payload: { ok: true },
        occurredAt: T0 - 5,
      }),
    )
    expect(ev).toStrictEqual({
      sequence: 1,
      sessionKey: 'agent:ops:worker',
      agentId: 'ops',
      kind: 'run_completed',
      actorType: 'agent',
      actorId: 'agent:ops:worker',
      runId: 'run-9',
      sessionId: 'sess-1',
      occurredAt: T0 - 5,
      summary: 'done',
      payload: { ok: true },
    })
    expect(s.changesSince('agent:ops:worker', 0).stateChanges.events).toStrictEqual([ev])
  })

  test('null and empty strings in optional inputs are absent', () => {
    const s = fx.open(fx.file())
    const ev = must(
      s.record({
        sessionKey: CHILD,
        kind: 'created',
        actorType: 'system',
        summary: 's',
        actorId: '',
        runId: '',
        sessionId: '',
        dedupeKey: '',
        // null is "absent" at the boundary, though the types say optional
        payload: null,
        occurredAt: null as unknown as number,
        agentId: null as unknown as string,
      }),
    )
    for (const k of ['actorId', 'runId', 'sessionId', 'payload']) expect(k in ev).toBe(false)
    expect(ev.agentId).toBe('main')
    // '' is not a dedupe key: a second record is a new row.
    const again = must(s.record({ sessionKey: CHILD, kind: 'created', actorType: 'system', summary: 's', dedupeKey: '' }))
    expect(again.sequence).toBe(2)
  })
})

describe('agent ids and sequences', () => {
  test('agentId defaults to the key’s agent, else main; bare keys under two agents are two sessions', () => {
    const s = fx.open(fx.file())
    const base = { kind: 'created' as const, actorType: 'system' as const, summary: 's' }
    expect(must(s.record({ ...base, sessionKey: 'agent:ops:x' })).agentId).toBe('ops')
    expect(must(s.record({ ...base, sessionKey: 'global' })).agentId).toBe('main')
    expect(must(s.record({ ...base, sessionKey: 'agent:MAIN:x' })).agentId).toBe('main')
    expect(must(s.record({ ...base, sessionKey: 'global', agentId: 'ops' })).agentId).toBe('ops')
    expect(must(s.record({ ...base, sessionKey: 'global', agentId: 'ops' })).sequence).toBe(5)
    expect(s.stateVersion('global')).toBe(2)
    expect(s.stateVersion('global', { agentId: 'ops' })).toBe(5)
    expect(s.stateVersion('agent:ops:x')).toBe(1)
    expect(s.changesSince('global', 0, { agentId: 'ops' }).stateChanges.events.map((e) => e.sequence)).toEqual([4, 5])
    expect(s.changesSince('global', 0).stateChanges.events.map((e) => e.sequence)).toEqual([2])
  })

  test('one global sequence over all sessions; a dedupe hit returns the first row and changes nothing', () => {
    const clock = new Clock()
    const s = fx.open(fx.file(), { clock: clock.fn })
    const a = must(s.record({ ...human(CHILD), dedupeKey: 'msg-1', summary: 'first' }))
    const b = must(s.record({ sessionKey: PARENT, kind: 'created', actorType: 'system', summary: 'p' }))
    expect([a.sequence, b.sequence]).toEqual([1, 2])
    s.watch(PARENT, CHILD)
    clock.advance(10)
    const dup = must(s.record({ ...human(CHILD), dedupeKey: 'msg-1', summary: 'second', occurredAt: T0 + 10 }))
    expect(dup).toStrictEqual(a)
    expect(s.stateVersion(CHILD)).toBe(1)
    expect(s.peek(PARENT)).toEqual([])
    const c = must(s.record(human(CHILD)))
    expect(c.sequence).toBeGreaterThan(2)
    expect(s.stateVersion(CHILD)).toBe(c.sequence)
    expect(s.changesSince(CHILD, 0).stateChanges.events.map((e) => e.sequence)).toEqual([1, c.sequence])
  })
})

describe('payload', () => {
  test('plain JSON data round-trips exactly', () => {
    const s = fx.open(fx.file())
    const payload = {
      s: 'text with "quotes" and \n and é😀',
      i: 42,
      neg: -7,
      f: 1.5,
      big: 2 ** 53 - 1,
      t: true,
      f2: false,
      n: null,
      arr: [1, 'two', [3], { four: 4 }, null],
      nested: { a: { b: { c: [] } } },
      empty: {},
    }
    const ev = must(s.record({ ...human(CHILD), payload }))
    expect(ev.payload).toStrictEqual(payload)
    expect(s.changesSince(CHILD, 0).stateChanges.events[0].payload).toStrictEqual(payload)
  })

  test('undefined members are dropped as JSON.stringify does; an empty object is kept', () => {
    const s = fx.open(fx.file())
    const ev = must(s.record({ ...human(CHILD), payload: { keep: 1, drop: undefined, list: [undefined, 2] } }))
    expect(ev.payload).toStrictEqual({ keep: 1, list: [null, 2] })
    const empty = must(s.record({ ...human(CHILD), payload: {} }))
    expect(empty.payload).toStrictEqual({})
  })

  test('stored as compact JSON: 4096 UTF-8 bytes pass, 4097 do not', () => {
    const file = fx.file()
    const sink = errorSink()
    const s = fx.open(file, { onError: sink.onError })
    // {"a":"…"} is 8 bytes around the string; 'é' is two bytes in UTF-8.
    const fits = { a: 'x'.repeat(4086) + 'é' }
    expect(JSON.stringify(fits).length + 1).toBe(4096)
    const ev = must(s.record({ ...human(CHILD), payload: fits }))
    const [row] = sql(file, 'SELECT payload_json AS p FROM session_state_events WHERE sequence = ?', ev.sequence)
    expect(row?.p).toBe(JSON.stringify(fits))
    expect(Buffer.byteLength(row?.p as string)).toBe(4096)
    expect(s.record({ ...human(CHILD), payload: { a: 'x'.repeat(4087) + 'é' } })).toBeNull()
    expect(sink.codes()).toEqual(['ERR_INVALID_ARG'])
    expect(s.stateVersion(CHILD)).toBe(1)
  })

  test.each([
    ['an array', [1, 2]],
    ['a string', 'text'],
    ['a number', 5],
    ['a function member', { f: () => 1 }],
    ['a NaN member', { n: NaN }],
    ['an Infinity member', { n: Infinity }],
    ['a BigInt member', { b: BigInt(1) }],
    ['a symbol member', { s: Symbol('x') }],
    ['nesting 40 levels deep', JSON.parse('{"a":'.repeat(40) + '1' + '}'.repeat(40))],
  ])('%s is refused with ERR_INVALID_ARG', (_what, payload) => {
    const sink = errorSink()
    const s = fx.open(fx.file(), { onError: sink.onError })
    expect(s.record({ ...human(CHILD), payload: payload as Record<string, unknown> })).toBeNull()
    expect(sink.codes()).toEqual(['ERR_INVALID_ARG'])
    expect(s.stateVersion(CHILD)).toBe(0)
  })

  test('a cyclic payload is refused, not looped on', () => {
    const sink = errorSink()
    const s = fx.open(fx.file(), { onError: sink.onError })
    const cyclic: Record<string, unknown> = { a: 1 }
    cyclic.self = cyclic
    expect(s.record({ ...human(CHILD), payload: cyclic })).toBeNull()
    expect(sink.codes()).toEqual(['ERR_INVALID_ARG'])
  })
})

describe('summary', () => {
  const cases: Array<[string, string, string]> = [
    ['each line break becomes one space', 'a\r\nb\rc\nd\u2028e\u2029f', 'a b c d e f'],
    ['CRLF is one space, LF CR is two', 'a\n\rb', 'a  b'],
    ['no trim', '  padded\t ', '  padded\t '],
    ['the empty summary is kept', '', ''],
  ]
  test.each(cases)('%s', (_what, input, expected) => {
    const s = fx.open(fx.file())
    expect(must(s.record({ ...human(CHILD), summary: input })).summary).toBe(expected)
    expect(s.changesSince(CHILD, 0).stateChanges.events[0].summary).toBe(expected)
  })

  test('the first 240 Unicode scalar values are kept', () => {
    const s = fx.open(fx.file())
    const long = must(s.record({ ...human(CHILD), summary: 'x'.repeat(239) + '😀😀' })).summary
    expect(long).toBe('x'.repeat(239) + '😀')
    expect([...long].length).toBe(240)
    const breaks = must(s.record({ ...human(CHILD), summary: '\r\n'.repeat(300) })).summary
    expect(breaks).toBe(' '.repeat(240))
    const exact = 'é'.repeat(240)
    expect(must(s.record({ ...human(CHILD), summary: exact })).summary).toBe(exact)
  })
})

describe('occurredAt', () => {
  const cases: Array<[string, number | undefined, number]> = [
    ['missing is now', undefined, T0],
    ['a fraction is floored', T0 - 1000.7, T0 - 1001],
    ['the future is clamped to now', T0 + 5000, T0],
    ['a just-future fraction is clamped to now', T0 + 0.5, T0],
    ['24 h ago is kept', T0 - DAY, T0 - DAY],
    ['older than 24 h is clamped to now - 24 h', T0 - 2 * DAY, T0 - DAY],
    ['a fraction past the window is clamped', T0 - DAY - 0.5, T0 - DAY],
    ['NaN is now', NaN, T0],
    ['Infinity is now', Infinity, T0],
    ['-Infinity is now', -Infinity, T0],
    ['0 is clamped', 0, T0 - DAY],
  ]
  test.each(cases)('%s', (_what, occurredAt, expected) => {
    const clock = new Clock()
    const s = fx.open(fx.file(), { clock: clock.fn })
    const ev = must(s.record({ ...human(CHILD), ...(occurredAt === undefined ? {} : { occurredAt }) }))
    expect(ev.occurredAt).toBe(expected)
    expect(s.changesSince(CHILD, 0).stateChanges.events[0].occurredAt).toBe(expected)
  })

  test('a fractional clock is floored', () => {
    const s = fx.open(fx.file(), { clock: () => T0 + 0.9 })
    expect(must(s.record(human(CHILD))).occurredAt).toBe(T0)
  })
})

describe('failures are reported, not thrown', () => {
  const bad: Array<[string, Record<string, unknown>]> = [
    ['unknown kind', { ...human(CHILD), kind: 'renamed' }],
    ['unknown actorType', { ...human(CHILD), actorType: 'robot' }],
    ['empty sessionKey', { ...human(CHILD), sessionKey: '' }],
    ['missing sessionKey', { kind: 'created', actorType: 'system', summary: 's' }],
    ['a number as sessionKey', { ...human(CHILD), sessionKey: 7 }],
    ['missing summary', { sessionKey: CHILD, kind: 'created', actorType: 'system' }],
    ['oversized payload', { ...human(CHILD), payload: { a: 'x'.repeat(5000) } }],
    ['an uppercase agentId', { ...human('global'), agentId: 'Ops' }],
    ['an agentId of 65 characters', { ...human('global'), agentId: 'a'.repeat(65) }],
    ['an agentId other than the key’s own', { ...human('agent:ops:x'), agentId: 'main' }],
    ['an empty agentId', { ...human('global'), agentId: '' }],
    ['watchers that are not strings', { ...human(CHILD), watchers: [PARENT, 5] }],
    ['watchers that is not an array', { ...human(CHILD), watchers: PARENT }],
    ['onlyIfWatched that is not a boolean', { ...human(CHILD), onlyIfWatched: 'yes' }],
    ['occurredAt that is not a number', { ...human(CHILD), occurredAt: '2030-01-01' }],
  ]

  test.each(bad)('%s: null and exactly one onError call with ERR_INVALID_ARG', (_what, input) => {
    const sink = errorSink()
    const s = fx.open(fx.file(), { onError: sink.onError })
    expect(s.record(input as never)).toBeNull()
    expect(sink.codes()).toEqual(['ERR_INVALID_ARG'])
    expect(types.isNativeError(sink.errors[0])).toBe(true)
    expect(s.stateVersion(CHILD)).toBe(0)
    expect(s.stateVersion('global')).toBe(0)
  })

  test.each([null, undefined, 'text', 5])('input %p: null and one ERR_INVALID_ARG', (input) => {
    const sink = errorSink()
    const s = fx.open(fx.file(), { onError: sink.onError })
    expect(s.record(input as never)).toBeNull()
    expect(sink.codes()).toEqual(['ERR_INVALID_ARG'])
  })

  test('after close: null and one ERR_CLOSED; close is idempotent', () => {
    const sink = errorSink()
    const s = fx.open(fx.file(), { onError: sink.onError })
    must(s.record(human(CHILD)))
    s.close()
    s.close()
    expect(s.record(human(CHILD))).toBeNull()
    expect(sink.codes()).toEqual(['ERR_CLOSED'])
  })

  test('strict: record throws with the code instead', () => {
    const sink = errorSink()
    const s = fx.open(fx.file(), { onError: sink.onError, strict: true })
    for (const input of bad.map(([, i]) => i)) {
      let code: string | undefined
      try {
        s.record(input as never)
      } catch (e) {
        code = (e as { code: string }).code
      }
      expect(code).toBe('ERR_INVALID_ARG')
    }
    expect(must(s.record(human(CHILD))).sequence).toBe(1)
    s.close()
    expect(() => s.record(human(CHILD))).toThrow(expect.objectContaining({ code: 'ERR_CLOSED' }))
    expect(sink.errors).toEqual([])
  })

  test('a throwing onError does not make record throw: the report falls back to stderr', () => {
    const script = `
      const { SessionState } = require(${JSON.stringify(path.resolve(__dirname, '..'))})
      const s = new SessionState(${JSON.stringify(path.join(fx.dir(), 'throwing-on-error.sqlite'))}, {
        onError: () => { throw new Error('host bug') },
      })
      const r = s.record({ sessionKey: 'agent:main:x', kind: 'nope', actorType: 'system', summary: 's' })
      const ok = s.record({ sessionKey: 'agent:main:x', kind: 'created', actorType: 'system', summary: 's' })
      console.log('result ' + r + ' then ' + ok.sequence)
    `
    const child = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 20_000 })
    expect([child.status, child.signal]).toEqual([0, null])
    expect(child.stdout).toBe('result null then 1\n')
    const lines = child.stderr.split('\n').filter((l) => l !== '')
    expect(lines).toHaveLength(1)
    expect(lines[0].startsWith('session-awareness: ERR_INVALID_ARG: ')).toBe(true)
  })

  test('a throwing or non-finite clock: record reports ERR_INVALID_ARG, other calls throw it', () => {
    const sink = errorSink()
    let value: number | (() => never) = NaN
    const s = fx.open(fx.file(), {
      onError: sink.onError,
      clock: () => (typeof value === 'function' ? value() : value),
    })
    expect(s.record(human(CHILD))).toBeNull()
    value = () => {
      throw new Error('clock broke')
    }
    expect(s.record(human(CHILD))).toBeNull()
    expect(sink.codes()).toEqual(['ERR_INVALID_ARG', 'ERR_INVALID_ARG'])
    expect(() => s.watch(PARENT, CHILD)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARG' }))
    expect(() => s.prune()).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARG' }))
    value = T0
    expect(must(s.record(human(CHILD))).occurredAt).toBe(T0)
  })
})

describe('onlyIfWatched', () => {
  test('nobody watching: null, nothing written, no onError, no throw even with strict', () => {
    const sink = errorSink()
    const s = fx.open(fx.file(), { onError: sink.onError, strict: true })
    expect(s.record({ ...human(CHILD), onlyIfWatched: true })).toBeNull()
    expect(s.record({ ...human(CHILD), onlyIfWatched: true, watchers: ['global', CHILD] })).toBeNull()
    expect(s.record({ ...human('global'), onlyIfWatched: true, watchers: [PARENT] })).toBeNull()
    expect(s.stateVersion(CHILD)).toBe(0)
    expect(s.stateVersion('global')).toBe(0)
    expect(sink.errors).toEqual([])
  })

  test('a cursor on the target, or a usable producer-named watcher, lets it write', () => {
    const s = fx.open(fx.file())
    const named = must(s.record({ ...human(CHILD), onlyIfWatched: true, watchers: ['global', PARENT] }))
    expect(named.sequence).toBe(1)
    const watched = must(s.record({ ...human(CHILD), onlyIfWatched: true }))
    expect(watched.sequence).toBe(2)
    const other = 'agent:main:subagent:d'
    expect(s.watch(PARENT, other)).toBe(true)
    expect(must(s.record({ ...human(other), onlyIfWatched: true })).sequence).toBe(3)
  })

  test('invalid input is still an error with onlyIfWatched', () => {
    const sink = errorSink()
    const s = fx.open(fx.file(), { onError: sink.onError })
    expect(s.record({ ...human(CHILD), kind: 'nope' as never, onlyIfWatched: true })).toBeNull()
    expect(sink.codes()).toEqual(['ERR_INVALID_ARG'])
  })
})

// The input's fields are read on the JS side of record and handed to the addon in one call;
// anything unusual goes through the addon's own reading. Both must give the same answers.
describe('how the input is read', () => {
  const full = {
    sessionKey: CHILD,
    agentId: 'main',
    sessionId: 'sid-1',
    kind: 'human_direct_message' as const,
    actorType: 'human' as const,
    actorId: 'telegram:42',
    runId: 'run-7',
    summary: 'line one\nline two',
    payload: { channel: 'telegram', n: 1.5, list: [1, 'x', null, true] },
    occurredAt: T0 - 5,
    dedupeKey: 'd-1',
    watchers: [PARENT],
    onlyIfWatched: false,
  }
  const expected = {
    sequence: 1,
    sessionKey: CHILD,
    agentId: 'main',
    kind: 'human_direct_message',
    actorType: 'human',
    actorId: 'telegram:42',
    runId: 'run-7',
    sessionId: 'sid-1',
    occurredAt: T0 - 5,
    summary: 'line one line two',
    payload: { channel: 'telegram', n: 1.5, list: [1, 'x', null, true] },
  }

  test('a plain object, a class instance and a proxy give the same event, keys in the documented order', () => {
    // The fields live in a private slot: an own enumerable member would be an unknown field.
    class Input {
      readonly #fields: typeof full
      constructor(fields: typeof full) {
        this.#fields = fields
      }
      get fields() { return this.#fields }
      get sessionKey() { return this.fields.sessionKey }
      get agentId() { return this.fields.agentId }
      get sessionId() { return this.fields.sessionId }
      get kind() { return this.fields.kind }
      get actorType() { return this.fields.actorType }
      get actorId() { return this.fields.actorId }
      get runId() { return this.fields.runId }
      get summary() { return this.fields.summary }
      get payload() { return this.fields.payload }
      get occurredAt() { return this.fields.occurredAt }
      get dedupeKey() { return this.fields.dedupeKey }
      get watchers() { return this.fields.watchers }
      get onlyIfWatched() { return this.fields.onlyIfWatched }
    }
    const inputs = [full, new Input(full), new Proxy({}, { get: (_t, k) => (full as Record<string | symbol, unknown>)[k] })]
    inputs.forEach((input, i) => {
      const clock = new Clock()
      const s = fx.open(fx.file(), { clock: clock.fn })
      const ev = must(s.record(input as never))
      expect(ev).toStrictEqual(expected)
      expect(Object.keys(ev)).toEqual(Object.keys(expected))
      expect(s.changesSince(CHILD, 0).stateChanges.events).toStrictEqual([expected])
      // The dedupe hit returns the first row through the same path.
      expect(s.record(input as never)).toStrictEqual(expected)
      expect([i, s.peek(PARENT).length]).toEqual([i, 1])
      s.close()
    })
  })

  test('a getter that throws is reported as ERR_INVALID_ARG, nothing stored; strict throws it', () => {
    const throwing = { ...human(CHILD) }
    Object.defineProperty(throwing, 'runId', { get: () => { throw new Error('boom') }, enumerable: true })
    const sink = errorSink()
    const s = fx.open(fx.file(), { onError: sink.onError })
    expect(s.record(throwing)).toBeNull()
    expect(sink.codes()).toEqual(['ERR_INVALID_ARG'])
    expect(s.stateVersion(CHILD)).toBe(0)
    const strict = fx.open(fx.file(), { strict: true })
    expect(() => strict.record(throwing)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARG' }))
    expect(strict.stateVersion(CHILD)).toBe(0)
  })

  test('each field is read once: a getter that throws on its first read is reported, nothing stored', () => {
    let reads = 0
    const input = { ...human(CHILD, { payload: { n: 1 } }) }
    Object.defineProperty(input, 'summary', {
      get: () => {
        reads += 1
        if (reads === 1) throw new Error('not yet')
        return 'second read'
      },
      enumerable: true,
    })
    const sink = errorSink()
    const s = fx.open(fx.file(), { clock: new Clock().fn, onError: sink.onError })
    expect(s.record(input)).toBeNull()
    expect([reads, sink.codes()]).toEqual([1, ['ERR_INVALID_ARG']])
    expect(s.stateVersion(CHILD)).toBe(0)
    expect(s.record(input)?.summary).toBe('second read')
    expect(reads).toBe(2)
  })

  test('the native store and its internal entry points are not part of the object', () => {
    const s = fx.open(fx.file())
    const names = [...Object.getOwnPropertyNames(s), ...Object.getOwnPropertyNames(Object.getPrototypeOf(s))]
    for (const internal of ['recordFields', 'drainSignal', 'native']) expect(names).not.toContain(internal)
    expect(typeof s.record).toBe('function')
  })

  test('record called on something that is not a store throws, as a method of a class does', () => {
    const s = fx.open(fx.file())
    expect(() => s.record.call({}, human(CHILD))).toThrow()
    expect(s.stateVersion(CHILD)).toBe(0)
  })
})
