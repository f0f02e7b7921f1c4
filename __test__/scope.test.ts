// Watcher scopes on cursors (semantics.md#cursors-scope) through the public API: `watch`'s
// `scope` and `refresh`, `record`'s `watcherScopes`, `acknowledge`'s `scope`, `Notice.scope`
// in drain and peek, and the `notifyKinds` and `seedResetsProvenance` options.
//
// Facts checked by running OpenClaw 2026.9.6's published module under Node 24
// (scripts/openclaw/load.mjs, 2026-11-30), each against the cursor row it left:
// - registerSessionStateWatch, same store path: an ambient-group row becomes explicit, L/N/M and
//   updated_at unchanged (1/2/2 at T+2 stays at T+2 after re-registering at T+10 and T+11);
// - registerSessionStateWatch, another path or NULL: re-seeded L=N=M=head (2/2/2), explicit,
//   updated_at = now, path = the watcher's store;
// - registerMainSessionGroupWatch, same path: nothing changes (3/4/4 stays, updated_at too);
//   another path over an explicit row: re-seeded 4/4/4 as ambient-group;
// - child_spawned with watcherStorePaths over an ambient-group row: explicit, path written;
//   with a map that lacks the watcher: path written as NULL;
// - human_direct_message whose given path differs from the row's (named, or only in the map):
//   row untouched; a new named cursor gets its given path;
// - run_completed for a named watcher with a cursor: row untouched (log only);
// - acknowledgeSessionStateNotices: a row whose path is NULL is skipped (9/11/11 stays); with no
//   store resolver published, any non-NULL path counts as current.
import { Clock, codeOf, encodeNoticeContextKey, errorSink, fixture, human, must, noticeText, spawn, sql } from './helpers'

const fx = fixture('scope')
const MAIN = 'agent:main:main'
const OPS = 'agent:ops:main'
const CHILD = 'agent:main:subagent:c'
const CHILD2 = 'agent:main:subagent:d'
const A = '/state/agents/main/agent/openclaw-agent.sqlite'
const B = '/state/agents/other/agent/openclaw-agent.sqlite'

function row(file: string, watcher: string, target: string) {
  return sql(
    file,
    'SELECT last_seen_sequence AS l, notified_sequence AS n, material_sequence AS m, provenance, ' +
      'updated_at AS at, watcher_store_path AS scope FROM session_watch_cursors ' +
      'WHERE watcher_session_key = ? AND target_session_key = ?',
    watcher,
    target,
  )[0]
}

describe('watch with a scope', () => {
  test('seeds a new cursor bound to the scope; the same scope keeps L, N, M', () => {
    const file = fx.file()
    const clock = new Clock()
    const s = fx.open(file, { clock: clock.fn, strict: true })
    s.record({ sessionKey: CHILD, kind: 'created', actorType: 'system', summary: 'c' }) // 1
    expect(s.watch(MAIN, CHILD, { scope: A })).toBe(true)
    expect(row(file, MAIN, CHILD)).toEqual({ l: 1, n: 1, m: 1, provenance: 'explicit', at: clock.now, scope: A })
    s.record(human(CHILD)) // 2
    const t1 = clock.advance(10)
    expect(s.watch(MAIN, CHILD, { scope: A })).toBe(true)
    expect(row(file, MAIN, CHILD)).toEqual({ l: 1, n: 2, m: 2, provenance: 'explicit', at: t1, scope: A })
    expect(s.peek(MAIN)).toEqual([
      { watcherKey: MAIN, targetKey: CHILD, changesSince: 1, text: noticeText(CHILD, 1), contextKey: encodeNoticeContextKey(CHILD), scope: A },
    ])
  })

  test('refresh: false leaves updated_at alone, as OpenClaw re-registers with the same path', () => {
    const file = fx.file()
    const clock = new Clock()
    const s = fx.open(file, { clock: clock.fn })
    s.watch(MAIN, CHILD, { scope: A, provenance: 'ambient-group' })
    const t0 = clock.now
    clock.advance(50)
    s.watch(MAIN, CHILD, { scope: A, provenance: 'ambient-group', refresh: false })
    expect(row(file, MAIN, CHILD)).toEqual({ l: 0, n: 0, m: 0, provenance: 'ambient-group', at: t0, scope: A })
    s.watch(MAIN, CHILD, { scope: A, refresh: false })
    expect(row(file, MAIN, CHILD)).toEqual({ l: 0, n: 0, m: 0, provenance: 'explicit', at: t0, scope: A })
  })

  test('another scope (or none stored) re-seeds at the head with the given provenance and drops the notice', () => {
    const file = fx.file()
    const clock = new Clock()
    const s = fx.open(file, { clock: clock.fn, strict: true })
    s.watch(MAIN, CHILD, { scope: A })
    s.record(human(CHILD)) // 1
    s.record(human(CHILD)) // 2
    expect(s.peek(MAIN).map((n) => [n.changesSince, n.scope])).toEqual([[0, A]])
    const t = clock.advance(5)
    expect(s.watch(MAIN, CHILD, { scope: B, provenance: 'ambient-group' })).toBe(true)
    expect(row(file, MAIN, CHILD)).toEqual({ l: 2, n: 2, m: 2, provenance: 'ambient-group', at: t, scope: B })
    expect(s.peek(MAIN)).toEqual([])
    expect(s.drain(MAIN)).toEqual([])
    // A cursor with no scope is bound elsewhere too.
    s.watch(OPS, CHILD)
    s.record(human(CHILD)) // 3
    expect(row(file, OPS, CHILD)).toMatchObject({ l: 2, n: 3, m: 3, scope: null })
    s.watch(OPS, CHILD, { scope: A })
    expect(row(file, OPS, CHILD)).toEqual({ l: 3, n: 3, m: 3, provenance: 'explicit', at: t, scope: A })
    expect(s.peek(OPS)).toEqual([])
  })

  test('no scope given leaves a bound cursor bound; bad scopes are ERR_INVALID_ARG and change nothing', () => {
    const file = fx.file()
    const s = fx.open(file)
    s.watch(MAIN, CHILD, { scope: A })
    s.watch(MAIN, CHILD)
    expect(row(file, MAIN, CHILD)).toMatchObject({ scope: A })
    for (const bad of ['', 'x'.repeat(4097)]) {
      expect(codeOf(() => s.watch(MAIN, CHILD2, { scope: bad }))).toBe('ERR_INVALID_ARG')
      expect(codeOf(() => s.acknowledge(MAIN, [CHILD], { scope: bad }))).toBe('ERR_INVALID_ARG')
    }
    expect(codeOf(() => s.watch(MAIN, CHILD2, { scope: 7 as unknown as string }))).toBe('ERR_INVALID_ARG')
    expect(codeOf(() => s.watch(MAIN, CHILD2, { refresh: 'no' as unknown as boolean }))).toBe('ERR_INVALID_ARG')
    expect(row(file, MAIN, CHILD2)).toBeUndefined()
    // 4,096 UTF-8 bytes pass.
    expect(s.watch(MAIN, CHILD2, { scope: 'é'.repeat(2048) })).toBe(true)
    expect(row(file, MAIN, CHILD2)).toMatchObject({ scope: 'é'.repeat(2048) })
  })
})

describe('record with watcherScopes', () => {
  test('a named watcher’s new cursor gets its scope, and drain hands the scope out', () => {
    const file = fx.file()
    const s = fx.open(file, { strict: true })
    const e = must(s.record(human(CHILD, { watchers: [MAIN], watcherScopes: { [MAIN]: A } })))
    expect(row(file, MAIN, CHILD)).toMatchObject({ l: 0, n: e.sequence, m: e.sequence, provenance: 'explicit', scope: A })
    expect(s.drain(MAIN)).toEqual([
      { watcherKey: MAIN, targetKey: CHILD, changesSince: 0, text: noticeText(CHILD, 0), contextKey: encodeNoticeContextKey(CHILD), scope: A },
    ])
  })

  test('a cursor bound to another scope than the given one is left alone and opens no notice', () => {
    const file = fx.file()
    const s = fx.open(file, { strict: true })
    s.watch(MAIN, CHILD, { scope: A })
    s.watch(OPS, CHILD, { scope: B })
    const e = must(s.record(human(CHILD, { watchers: [MAIN], watcherScopes: { [MAIN]: B } })))
    expect(row(file, MAIN, CHILD)).toMatchObject({ l: 0, n: 0, m: 0 })
    expect(s.peek(MAIN)).toEqual([])
    // OPS is found from its cursor and keeps its stored scope.
    expect(row(file, OPS, CHILD)).toMatchObject({ l: 0, n: e.sequence, m: e.sequence, scope: B })
    expect(s.peek(OPS).map((n) => [n.targetKey, n.changesSince, n.scope])).toEqual([[CHILD, 0, B]])
  })

  test('a spawn binds the named watcher’s cursor and keeps its provenance; seedResetsProvenance makes it explicit', () => {
    for (const reset of [false, true]) {
      const file = fx.file()
      const s = fx.open(file, { strict: true, seedResetsProvenance: reset })
      s.watch(MAIN, CHILD, { scope: A, provenance: 'ambient-group' })
      const e = must(s.record({ ...spawn(CHILD, MAIN), watcherScopes: { [MAIN]: B } }))
      const q = e.sequence
      expect(row(file, MAIN, CHILD)).toMatchObject({
        l: q,
        n: q,
        m: q,
        provenance: reset ? 'explicit' : 'ambient-group',
        scope: B,
      })
    }
  })

  test('watcherScopes must map keys to non-empty strings: null and a refused record otherwise', () => {
    const file = fx.file()
    const sink = errorSink()
    const s = fx.open(file, { onError: sink.onError })
    expect(s.record(human(CHILD, { watchers: [MAIN], watcherScopes: { [MAIN]: 3 } }))).toBeNull()
    expect(s.record(human(CHILD, { watchers: [MAIN], watcherScopes: { [MAIN]: '' } }))).toBeNull()
    expect(s.record(human(CHILD, { watchers: [MAIN], watcherScopes: [A] }))).toBeNull()
    expect(sink.codes()).toEqual(['ERR_INVALID_ARG', 'ERR_INVALID_ARG', 'ERR_INVALID_ARG'])
    expect(s.stateVersion(CHILD)).toBe(0)
  })
})

describe('acknowledge with a scope', () => {
  test('acknowledges only the cursors bound to the scope; the others stay queued', () => {
    const file = fx.file()
    const s = fx.open(file, { strict: true })
    s.watch(MAIN, CHILD, { scope: A })
    s.watch(MAIN, CHILD2, { scope: B })
    s.watch(MAIN, OPS)
    s.record(human(CHILD)) // 1
    s.record(human(CHILD2)) // 2
    s.record(human(OPS)) // 3
    expect(s.acknowledge(MAIN, [CHILD, CHILD2, OPS], { scope: A })).toBe(1)
    expect(row(file, MAIN, CHILD)).toMatchObject({ l: 1, n: 1, m: 1 })
    expect(row(file, MAIN, CHILD2)).toMatchObject({ l: 0, n: 2, m: 2 })
    expect(row(file, MAIN, OPS)).toMatchObject({ l: 0, n: 3, m: 3 })
    expect(s.peek(MAIN).map((n) => [n.targetKey, n.scope ?? null])).toEqual([
      [CHILD2, B],
      [OPS, null],
    ])
    expect('scope' in (s.peek(MAIN)[1] as object)).toBe(false)
    expect(s.acknowledge(MAIN, [CHILD2, OPS])).toBe(2)
    expect(s.peek(MAIN)).toEqual([])
  })
})

describe('notifyKinds', () => {
  test('run_completed notifies when named; goal_changed left out is log only', () => {
    const file = fx.file()
    const s = fx.open(file, { strict: true, notifyKinds: ['human_direct_message', 'run_completed'] })
    s.watch(MAIN, CHILD)
    s.record({ sessionKey: CHILD, kind: 'run_completed', actorType: 'system', summary: 'done' }) // 1
    s.record({ sessionKey: CHILD, kind: 'goal_changed', actorType: 'human', summary: 'g', watchers: [OPS] }) // 2
    expect(row(file, MAIN, CHILD)).toMatchObject({ l: 0, n: 1, m: 1 })
    expect(row(file, OPS, CHILD)).toBeUndefined()
    expect(s.drain(MAIN).map((n) => n.text)).toEqual([noticeText(CHILD, 0)])
  })

  test('the default keeps run_completed and run_failed log only; bad values are ERR_INVALID_ARG', () => {
    const file = fx.file()
    const s = fx.open(file, { strict: true })
    s.watch(MAIN, CHILD)
    s.record({ sessionKey: CHILD, kind: 'run_completed', actorType: 'system', summary: 'done' })
    s.record({ sessionKey: CHILD, kind: 'run_failed', actorType: 'system', summary: 'failed' })
    expect(s.peek(MAIN)).toEqual([])
    for (const notifyKinds of [['child_spawned'], ['nope'], 'goal_changed', [1]]) {
      expect(codeOf(() => fx.open(fx.file(), { notifyKinds } as never))).toBe('ERR_INVALID_ARG')
    }
    expect(codeOf(() => fx.open(fx.file(), { seedResetsProvenance: 'yes' } as never))).toBe('ERR_INVALID_ARG')
  })
})
