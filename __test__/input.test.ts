// Input (semantics.md#api-arguments, #keys, #recording-validation): one rule per concept, the
// same for every synchronous method, its Promise twin and the constructor: blank keys and
// blank key-list entries refused, a payload stored as it reads back, unknown option names
// and record fields refused, a boolean callback that answers anything else refused, and
// every refusal naming the parameter as the call calls it.
import { SessionState, errOf, fixture, human, must, spawn, sql } from './helpers'
import { SessionStateError } from '../lib'

const fx = fixture('input')
const MAIN = 'agent:main:main'
const CHILD = 'agent:main:subagent:child'
const BLANKS = ['', '   ', '\t\n', '\u3000']

/** The rejection of `p`, which must reject. */
async function rejection(p: Promise<unknown>): Promise<SessionStateError> {
  return p.then(
    () => {
      throw new Error('expected a rejection')
    },
    (e: SessionStateError) => e,
  )
}

function strictStore(): SessionState {
  return fx.open(fx.file(), { strict: true })
}

describe('blank keys', () => {
  test('a blank session or watcher key is ERR_INVALID_ARG naming the parameter, sync and async', async () => {
    const s = strictStore()
    for (const k of BLANKS) {
      expect(errOf(() => s.record(human(k))).message).toMatch(/sessionKey/)
      expect(errOf(() => s.record(human(k))).code).toBe('ERR_INVALID_ARG')
      for (const [call, name] of [
        [() => s.drain(k), 'watcherKey'],
        [() => s.peek(k), 'watcherKey'],
        [() => s.watch(k, CHILD), 'watcherKey'],
        [() => s.watch(MAIN, k), 'targetKey'],
        [() => s.unwatch(k, CHILD), 'watcherKey'],
        [() => s.acknowledge(k, [CHILD]), 'watcherKey'],
        [() => s.stateVersion(k), 'sessionKey'],
        [() => s.changesSince(k, 0), 'sessionKey'],
        [() => s.resetSession(k), 'sessionKey'],
        [() => s.deleteSession(k), 'sessionKey'],
        [() => s.cursorRows({ watcherKey: k }), 'watcherKey'],
      ] as const) {
        const e = errOf(call)
        expect([k, e.code]).toEqual([k, 'ERR_INVALID_ARG'])
        expect(e.message).toMatch(name)
      }
      for (const [p, name] of [
        [s.drainAsync(k), 'watcherKey'],
        [s.watchAsync(MAIN, k), 'targetKey'],
        [s.acknowledgeAsync(k, [CHILD]), 'watcherKey'],
        [s.changesSinceAsync(k, 0), 'sessionKey'],
        [s.deleteSessionAsync(k), 'sessionKey'],
      ] as const) {
        const e = await rejection(p)
        expect([k, e.code]).toEqual([k, 'ERR_INVALID_ARG'])
        expect(e.message).toMatch(name)
      }
    }
    // Nothing was stored or watched by any of it.
    expect(s.cursorRows()).toEqual([])
    expect(s.record(human(' x '))?.sessionKey).toBe(' x ')
  })

  test('a blank record is null plus one onError without strict, and recordAsync the same', async () => {
    const errors: SessionStateError[] = []
    const s = fx.open(fx.file(), { onError: (e) => errors.push(e) })
    expect(s.record(human('   '))).toBeNull()
    expect(await s.recordAsync(human('   '))).toBeNull()
    expect(errors.map((e) => e.code)).toEqual(['ERR_INVALID_ARG', 'ERR_INVALID_ARG'])
    expect(s.stateVersion('agent:main:x')).toBe(0)
  })
})

describe('key lists: a blank entry is refused alike everywhere, naming its index', () => {
  test('watchers, serveWatchers, acknowledge targets, stateVersions refs', async () => {
    const s = strictStore()
    const cases: Array<[() => unknown, string]> = [
      [() => s.record({ ...human(CHILD), watchers: [MAIN, ''] }), 'watchers[1]'],
      [() => s.record({ ...spawn(CHILD, MAIN), watchers: ['  ', MAIN] }), 'watchers[0]'],
      [() => s.record({ ...human(CHILD), watcherScopes: { ' ': '/x' } }), 'watcherScopes'],
      [() => new SessionState(fx.file(), { serveWatchers: [MAIN, ''] }), 'serveWatchers[1]'],
      [() => new SessionState(fx.file(), { serveWatchers: ['   '] }), 'serveWatchers[0]'],
      [() => new SessionState(fx.file(), { notifyKinds: ['goal_changed', ''] as never }), 'notifyKinds[1]'],
      [() => s.acknowledge(MAIN, [CHILD, ' ']), 'targetKeys[1]'],
      [() => s.stateVersions([{ sessionKey: CHILD }, { sessionKey: '' }]), 'refs[1].sessionKey'],
    ]
    for (const [call, name] of cases) {
      const e = errOf(call)
      expect([name, e.code]).toEqual([name, 'ERR_INVALID_ARG'])
      expect(e.message).toContain(name)
    }
    const e = await rejection(s.acknowledgeAsync(MAIN, ['', CHILD]))
    expect(e.code).toBe('ERR_INVALID_ARG')
    expect(e.message).toContain('targetKeys[0]')
    const r = await rejection(s.stateVersionsAsync([{ sessionKey: '\t' }]))
    expect(r.message).toContain('refs[0].sessionKey')
    expect(s.stateVersion(CHILD)).toBe(0)
  })

  test('an entry of the wrong type names its index, not "must be an object"', async () => {
    const s = strictStore()
    const e = errOf(() => s.record({ ...human(CHILD), watchers: [MAIN, 1 as never] }))
    expect(e.code).toBe('ERR_INVALID_ARG')
    expect(e.message).toMatch(/watchers\[1\] must be a string/)
    expect(errOf(() => s.record({ ...human(CHILD), watchers: 'x' as never })).message).toMatch(/watchers must be an array/)
    expect(errOf(() => s.acknowledge(MAIN, [null as never])).message).toMatch(/targetKeys\[0\] must be a string/)
    expect(errOf(() => new SessionState(fx.file(), { serveWatchers: [7 as never] })).message).toMatch(
      /serveWatchers\[0\] must be a string/,
    )
    expect((await rejection(s.acknowledgeAsync(MAIN, [CHILD, {} as never]))).message).toMatch(/targetKeys\[1\]/)
  })

  test('bare entries are keys: dropped from watchers, not refused', () => {
    const s = strictStore()
    must(s.record({ ...spawn(CHILD, MAIN), watchers: ['global', MAIN] }))
    expect(s.cursorRows().map((r) => [r.watcherKey, r.targetKey])).toEqual([[MAIN, CHILD]])
  })
})

describe('a payload is stored as it will read back', () => {
  test('a Date is its ISO string, in the stored text and in every read', () => {
    const file = fx.file()
    const s = fx.open(file, { strict: true })
    const ev = must(s.record(human(CHILD, { payload: { at: new Date(0), n: [new Date(86_400_000)] } })))
    const text = '{"at":"1970-01-01T00:00:00.000Z","n":["1970-01-02T00:00:00.000Z"]}'
    expect(ev.payload).toEqual(JSON.parse(text))
    expect(s.changesSince(CHILD, 0).stateChanges.events[0]?.payload).toEqual(JSON.parse(text))
    s.close()
    expect(sql(file, 'SELECT payload_json AS p FROM session_state_events')).toEqual([{ p: text }])
  })

  test('values JSON cannot carry faithfully are ERR_INVALID_ARG naming their path', async () => {
    class Point {
      x = 1
    }
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ at: new Date(0), m: new Map([[1, 2]]) }, 'payload.m'],
      [{ s: new Set([1]) }, 'payload.s'],
      [{ p: new Point() }, 'payload.p'],
      [{ deep: { list: [1, new Uint8Array(2)] } }, 'payload.deep.list[1]'],
      [{ b: Buffer.from('x') }, 'payload.b'],
      [{ ab: new ArrayBuffer(4) }, 'payload.ab'],
      [{ r: /x/ }, 'payload.r'],
      [{ d: new Date(NaN) }, 'payload.d'],
      [{ 'a b': new String('x') }, 'payload["a b"]'],
      [{ n: Infinity }, 'payload.n'],
      [{ f: () => 1 }, 'payload.f'],
      [{ p: Promise.resolve(1) }, 'payload.p'],
    ]
    const errors: SessionStateError[] = []
    const file = fx.file()
    const s = fx.open(file, { onError: (e) => errors.push(e) })
    const strict = fx.open(fx.file(), { strict: true })
    for (const [payload, path] of cases) {
      errors.length = 0
      expect(s.record(human(CHILD, { payload }))).toBeNull()
      expect(errors.map((e) => e.code)).toEqual(['ERR_INVALID_ARG'])
      expect(errors[0]?.message).toContain(path)
      expect(await s.recordAsync(human(CHILD, { payload }))).toBeNull()
      expect(errors).toHaveLength(2)
      const e = errOf(() => strict.record(human(CHILD, { payload })))
      expect([path, e.code]).toEqual([path, 'ERR_INVALID_ARG'])
      expect(e.message).toContain(path)
    }
    expect(s.stateVersion(CHILD)).toBe(0)
    // Objects without a prototype are plain data.
    const bare = Object.assign(Object.create(null) as Record<string, unknown>, { k: 1 })
    expect(must(strict.record(human(CHILD, { payload: bare }))).payload).toEqual({ k: 1 })
  })
})

describe('unknown option names and record fields', () => {
  test('are ERR_INVALID_ARG naming them, in every call and its twin', async () => {
    expect(errOf(() => new SessionState(fx.file(), { wakeCoalescMs: 10 } as never)).message).toContain('wakeCoalescMs')
    const opened = await rejection(SessionState.open(fx.file(), { syncIntervalMS: 5 } as never))
    expect(opened.code).toBe('ERR_INVALID_ARG')
    expect(opened.message).toContain('syncIntervalMS')
    const s = strictStore()
    const sync: Array<[() => unknown, string]> = [
      [() => s.record({ ...human(CHILD), onlyIfWached: true } as never), 'onlyIfWached'],
      [() => s.watch(MAIN, CHILD, { refesh: true } as never), 'refesh'],
      [() => s.acknowledge(MAIN, [CHILD], { scpe: 'x' } as never), 'scpe'],
      [() => s.changesSince(CHILD, 0, { limt: 5 } as never), 'limt'],
      [() => s.stateVersion(CHILD, { agent: 'main' } as never), 'agent'],
      [() => s.deleteSession(CHILD, { agentID: 'main' } as never), 'agentID'],
      [() => s.sweep({ watcherExist: () => true } as never), 'watcherExist'],
      [() => s.cursorRows({ watcher: MAIN } as never), 'watcher'],
      [() => s.stateVersions([{ sessionKey: CHILD, agent: 'main' } as never]), 'agent'],
      [() => s.startUpstreamMonitor({ interval: 5 } as never), 'interval'],
    ]
    for (const [call, name] of sync) {
      const e = errOf(call)
      expect([name, e.code]).toEqual([name, 'ERR_INVALID_ARG'])
      expect(e.message).toContain(name)
    }
    const async: Array<[Promise<unknown>, string]> = [
      [s.recordAsync({ ...human(CHILD), dedupe: 'x' } as never), 'dedupe'],
      [s.watchAsync(MAIN, CHILD, { provenence: 'explicit' } as never), 'provenence'],
      [s.acknowledgeAsync(MAIN, [CHILD], { scopes: 'x' } as never), 'scopes'],
      [s.changesSinceAsync(CHILD, 0, { agent_id: 'main' } as never), 'agent_id'],
      [s.deleteSessionAsync(CHILD, { agentid: 'main' } as never), 'agentid'],
      [s.sweepAsync({ exists: () => true } as never), 'exists'],
    ]
    for (const [p, name] of async) {
      const e = await rejection(p)
      expect([name, e.code]).toEqual([name, 'ERR_INVALID_ARG'])
      expect(e.message).toContain(name)
    }
    expect(s.stateVersion(CHILD)).toBe(0)
    expect(s.cursorRows()).toEqual([])
  })

  test('the known names are taken, undefined members included; acknowledge knows through', async () => {
    const s = strictStore()
    must(s.record({ ...human(CHILD), agentId: undefined, watchers: undefined, onlyIfWatched: undefined }))
    expect(s.watch(MAIN, CHILD, { provenance: 'explicit', scope: undefined, refresh: undefined })).toBe(true)
    expect(s.acknowledge(MAIN, [CHILD], { through: 1 } as never)).toBe(0)
    expect(await s.acknowledgeAsync(MAIN, [CHILD], { scope: undefined, through: 1 } as never)).toBe(0)
    expect(s.changesSince(CHILD, 0, { agentId: 'main', limit: 1 }).stateVersion).toBe(1)
  })
})

describe('watcherExists must answer a boolean', () => {
  test('a Promise (an async callback), undefined or a number is refused and nothing is swept', async () => {
    for (const [answer, words] of [
      [async () => true, /Promise.*synchronous/],
      [() => undefined, /must return a boolean/],
      [() => 1, /must return a boolean/],
    ] as const) {
      const file = fx.file()
      const s = fx.open(file, { strict: true })
      expect(s.watch(MAIN, CHILD)).toBe(true)
      must(s.record(human(CHILD)))
      expect(s.drain(MAIN)).toHaveLength(1)
      must(s.record(human(CHILD)))
      s.close()
      const reopened = fx.open(file, { strict: true, syncIntervalMs: 0 }) // no first-drain read: only a sweep queues
      const before = reopened.cursorRows()
      const e = errOf(() => reopened.sweep({ watcherExists: answer as never }))
      expect(e.code).toBe('ERR_INVALID_ARG')
      expect(e.message).toMatch(words)
      expect(e.message).toMatch(/watcherExists/)
      const a = await rejection(reopened.sweepAsync({ watcherExists: answer as never }))
      expect(a.code).toBe('ERR_INVALID_ARG')
      expect(a.message).toMatch(words)
      // Nothing was swept: the cursor rows are as they were and no notice is queued.
      expect(reopened.cursorRows()).toEqual(before)
      expect(reopened.peek(MAIN)).toEqual([])
      expect(reopened.sweep({ watcherExists: () => true }).notices).toBe(1)
    }
  })
})
