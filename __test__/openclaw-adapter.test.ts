// The OpenClaw adapter (session-awareness/openclaw) on its own, without OpenClaw: its default
// host services, OpenClaw's names with their parameters and results, and the rule that no
// function throws. scripts/openclaw-diff.mjs compares it with OpenClaw's published module.
import * as fs from 'node:fs'
import * as os from 'node:os'
import * as path from 'node:path'

import * as oc from '../lib/openclaw'
import { DAY, HOUR, T0, type CodedError, fixture } from './helpers'

const f = fixture('openclaw')

const M = 'agent:main:main'
const CHILD = 'agent:main:subagent:a'
const GROUP = 'agent:main:group:g1'

let errors: CodedError[] = []
let stateDir = ''

function configure(host: oc.HostServices = {}): void {
  errors = []
  stateDir = path.join(f.dir(), `state-${Math.random().toString(36).slice(2)}`)
  oc.configureSessionState({
    path: path.join(stateDir, 'state', 'session-state.sqlite'),
    host: {
      resolvePhysicalSessionStorePath: ({ sessionKey }) => `/stores/${oc.resolveAgentIdFromSessionKey(sessionKey)}.sqlite`,
      ...host,
    },
    onError: (e) => errors.push(e as CodedError),
  })
}

afterEach(() => oc.closeSessionState())

describe('session keys (default host services)', () => {
  test('parseAgentSessionKey splits agent-qualified keys and refuses the rest', () => {
    expect(oc.parseAgentSessionKey('agent:main:subagent:x')).toEqual({ agentId: 'main', rest: 'subagent:x' })
    expect(oc.parseAgentSessionKey('AGENT: Ops :a:b')).toEqual({ agentId: 'Ops', rest: 'a:b' })
    for (const bad of ['main', 'global', 'agent:main', 'agent::x', 'agent:main:', 'agent:main::x', 'agent: :x']) {
      expect(oc.parseAgentSessionKey(bad)).toBeNull()
    }
  })

  test('normalizeAgentId lowercases, replaces invalid runs with a dash, falls back to main', () => {
    expect(oc.normalizeAgentId('Ops')).toBe('ops')
    expect(oc.normalizeAgentId(' my agent! ')).toBe('my-agent')
    expect(oc.normalizeAgentId('--x--')).toBe('x')
    expect(oc.normalizeAgentId('!!!')).toBe('main')
    expect(oc.normalizeAgentId('a'.repeat(70))).toBe('a'.repeat(64))
    expect(oc.normalizeAgentId(undefined)).toBe('main')
  })

  test('resolveAgentIdFromSessionKey takes the key own agent, else the default, else throws', () => {
    expect(oc.resolveAgentIdFromSessionKey('agent:Ops:main')).toBe('ops')
    expect(oc.resolveAgentIdFromSessionKey('global', 'Work')).toBe('work')
    expect(() => oc.resolveAgentIdFromSessionKey('global')).toThrow()
    expect(() => oc.resolveAgentIdFromSessionKey('agent:main', 'main')).toThrow()
  })

  test('isSubagentSessionKey, buildAgentMainSessionKey and classifySessionKind', () => {
    expect(oc.isSubagentSessionKey('agent:main:subagent:x')).toBe(true)
    expect(oc.isSubagentSessionKey('agent:main:SubAgent:x')).toBe(true)
    expect(oc.isSubagentSessionKey('subagent:x')).toBe(true)
    expect(oc.isSubagentSessionKey('agent:main:subagentx')).toBe(false)
    expect(oc.isSubagentSessionKey('agent:main:main')).toBe(false)
    expect(oc.buildAgentMainSessionKey({ agentId: 'Ops' })).toBe('agent:ops:main')
    expect(oc.buildAgentMainSessionKey({ agentId: 'ops', mainKey: ' Home ' })).toBe('agent:ops:home')
    expect(oc.classifySessionKind('global')).toBe('global')
    expect(oc.classifySessionKind('unknown')).toBe('unknown')
    expect(oc.classifySessionKind('agent:main:cron:job')).toBe('cron')
    expect(oc.classifySessionKind('agent:main:x', { spawnedBy: M })).toBe('spawn-child')
    expect(oc.classifySessionKind('agent:main:x', { chatType: 'channel' })).toBe('group')
    expect(oc.classifySessionKind('agent:main:telegram:group:1')).toBe('group')
    expect(oc.classifySessionKind('agent:main:direct:1')).toBe('direct')
  })

  test('the default state file is <OPENCLAW_STATE_DIR or ~/.openclaw>/state/session-state.sqlite', () => {
    expect(oc.defaultStatePath({ OPENCLAW_STATE_DIR: '/srv/oc' })).toBe(path.join('/srv/oc', 'state', 'session-state.sqlite'))
    expect(oc.defaultStatePath({})).toBe(path.join(os.homedir(), '.openclaw', 'state', 'session-state.sqlite'))
  })
})

describe('pure helpers', () => {
  test('classifySessionStateActor follows the input provenance', () => {
    expect(oc.classifySessionStateActor({})).toEqual({ actorType: 'human' })
    expect(oc.classifySessionStateActor({ humanActorId: 'h:1' })).toEqual({ actorType: 'human', actorId: 'h:1' })
    expect(oc.classifySessionStateActor({ inputProvenance: { kind: 'inter_session', sourceSessionKey: M } })).toEqual({
      actorType: 'agent',
      actorId: M,
    })
    expect(oc.classifySessionStateActor({ inputProvenance: { kind: 'inter_session' } })).toEqual({ actorType: 'agent' })
    expect(oc.classifySessionStateActor({ inputProvenance: { kind: 'internal_system' }, humanActorId: 'h' })).toEqual({
      actorType: 'system',
    })
    expect(oc.classifySessionStateActor({ internalEvents: [1] })).toEqual({ actorType: 'system' })
    expect(oc.classifySessionStateActor({ sessionEffects: 'internal' })).toEqual({ actorType: 'system' })
  })

  test('decodeSessionStateNoticeContextKey returns the key or undefined', () => {
    expect(oc.decodeSessionStateNoticeContextKey('session-state:6167656e743a78')).toBe('agent:x')
    for (const bad of ['session-state:', 'session-state:6', 'session-state:6G', 'session-state:FF', 'other:61', 'session-state:6167656E']) {
      expect(oc.decodeSessionStateNoticeContextKey(bad)).toBeUndefined()
    }
    expect(oc.decodeSessionStateNoticeContextKey('session-state:efbbbf61')).toBe('\ufeffa')
  })
})

describe('the API over the store', () => {
  test('the store is opened at the configured path with mode 0600, never OpenClaw\'s own database', () => {
    configure()
    oc.getSessionStateVersion(M, 'main')
    const file = path.join(stateDir, 'state', 'session-state.sqlite')
    expect(fs.existsSync(file)).toBe(true)
    expect(fs.existsSync(path.join(stateDir, 'state', 'openclaw.sqlite'))).toBe(false)
    if (process.platform !== 'win32') expect(fs.statSync(file).mode & 0o777).toBe(0o600)
  })

  test('a blank named watcher is dropped, as OpenClaw drops it, where the store would refuse it', () => {
    configure()
    const e = oc.recordSessionStateEvent(
      { sessionKey: CHILD, agentId: 'main', kind: 'child_spawned', actorType: 'agent', actorId: M, summary: 'spawn', watcherSessionKeys: ['', '  ', M] },
      { now: T0 },
    )
    expect(e?.sequence).toBe(1)
    expect(oc.getSessionStateVersions([{ sessionKey: '   ' }, { sessionKey: CHILD }])).toEqual({ main: { [CHILD]: 1 } })
  })

  test('recordSessionStateEvent returns OpenClaw\'s event shape; options.now is the store clock', () => {
    configure()
    const e = oc.recordSessionStateEvent(
      { sessionKey: CHILD, agentId: 'main', kind: 'run_failed', actorType: 'system', summary: 'failed', runId: 'r1', payload: { outcome: 'error' } },
      { now: T0 },
    )
    expect(e).toEqual({
      sequence: 1,
      sessionKey: CHILD,
      agentId: 'main',
      kind: 'run_failed',
      actorType: 'system',
      runId: 'r1',
      occurredAt: T0,
      summary: 'failed',
      payload: { outcome: 'error' },
    })
    expect(Object.keys(e as object)).toEqual(['sequence', 'sessionKey', 'agentId', 'kind', 'actorType', 'runId', 'occurredAt', 'summary', 'payload'])
    // occurredAt is clamped into [now - 24 h, now] on the call's clock.
    const late = oc.recordSessionStateEvent(
      { sessionKey: CHILD, agentId: 'main', kind: 'compacted', actorType: 'system', summary: 's', occurredAt: T0 - 3 * DAY },
      { now: T0 + HOUR },
    )
    expect(late?.occurredAt).toBe(T0 + HOUR - DAY)
  })

  test('a repeated dedupe key returns the first event and changes nothing', () => {
    configure()
    const first = oc.recordSessionStateEvent(
      { sessionKey: CHILD, agentId: 'main', kind: 'compacted', actorType: 'system', summary: 'one', dedupeKey: 'k' },
      { now: T0 },
    )
    const again = oc.recordSessionStateEvent(
      { sessionKey: CHILD, agentId: 'main', kind: 'compacted', actorType: 'system', summary: 'two', dedupeKey: 'k' },
      { now: T0 + 5 },
    )
    expect(again).toEqual(first)
    expect(oc.getSessionStateVersion(CHILD, 'main')).toBe(1)
  })

  test('a refused call returns OpenClaw\'s default and reports once through onError, never throwing', () => {
    configure()
    const bad = { sessionKey: CHILD, agentId: 'main', kind: 'nope', actorType: 'system', summary: 's' } as never
    expect(oc.recordSessionStateEvent(bad, { now: T0 })).toBeUndefined()
    expect(errors.map((e) => e.code)).toEqual(['ERR_INVALID_ARG'])
    errors = []
    expect(oc.getSessionStateVersion('', 'main')).toBe(0)
    expect(oc.listSessionStateEventsSince('', 'main', 0)).toEqual({
      events: [],
      truncated: false,
      earliestAvailableSequence: 0,
      historyGap: false,
    })
    expect(oc.hasSessionStateWatchers('')).toBe(false)
    expect(errors.map((e) => e.code)).toEqual(['ERR_INVALID_ARG', 'ERR_INVALID_ARG', 'ERR_INVALID_ARG'])
  })

  test('a host service that throws is reported as ERR_HOST_CALLBACK and the call returns its default', () => {
    configure({
      resolvePhysicalSessionStorePath: () => {
        throw new Error('no store')
      },
    })
    expect(oc.registerSessionStateWatch({ watcherSessionKey: M, targetSessionKey: CHILD }, { now: T0 })).toBe(false)
    expect(errors.map((e) => e.code)).toEqual(['ERR_HOST_CALLBACK'])
  })

  test('versions: one session, and many keyed agent then session, leaving out sessions at 0', () => {
    configure()
    for (const key of [CHILD, 'agent:ops:main', CHILD]) {
      oc.recordSessionStateEvent({ sessionKey: key, agentId: oc.resolveAgentIdFromSessionKey(key), kind: 'created', actorType: 'system', summary: 's' }, { now: T0 })
    }
    expect(oc.getSessionStateVersion(CHILD, 'main')).toBe(3)
    expect(oc.getSessionStateVersion(CHILD, 'ops')).toBe(0)
    expect(oc.getSessionStateVersions([{ sessionKey: CHILD }, { sessionKey: 'agent:ops:main' }, { sessionKey: M }, { sessionKey: CHILD }])).toEqual({
      main: { [CHILD]: 3 },
      ops: { 'agent:ops:main': 2 },
    })
    expect(oc.getSessionStateVersions([])).toEqual({})
  })

  test('listSessionStateEventsSince pages and reads a negative position as a gap from the start', () => {
    configure()
    for (let i = 0; i < 3; i++) {
      oc.recordSessionStateEvent({ sessionKey: CHILD, agentId: 'main', kind: 'compacted', actorType: 'system', summary: `s${i}` }, { now: T0 + i })
    }
    const page = oc.listSessionStateEventsSince(CHILD, 'main', 1, 1)
    expect(page.events.map((e) => e.sequence)).toEqual([2])
    expect(page).toMatchObject({ truncated: true, earliestAvailableSequence: 1, historyGap: false })
    const all = oc.listSessionStateEventsSince(CHILD, 'main', -1)
    expect(all.events.map((e) => e.sequence)).toEqual([1, 2, 3])
    expect(all).toMatchObject({ truncated: false, historyGap: true })
    expect(oc.listSessionStateEventsSince(CHILD, 'main', 1.5, 2.9).events.map((e) => e.sequence)).toEqual([2, 3])
  })

  test('watchers: hasSessionStateWatchers, listAmbientGroupWatchTargets, reset and delete', () => {
    configure()
    expect(oc.hasSessionStateWatchers(CHILD)).toBe(false)
    expect(oc.registerSessionStateWatch({ watcherSessionKey: M, targetSessionKey: CHILD }, { now: T0 })).toBe(true)
    expect(oc.registerMainSessionGroupWatch({ sessionKey: GROUP, agentId: 'main' }, { now: T0 })).toBe(true)
    expect(oc.registerMainSessionGroupWatch({ sessionKey: 'agent:main:direct:1', agentId: 'main' }, { now: T0 })).toBe(false)
    expect(oc.registerMainSessionGroupWatch({ sessionKey: 'agent:main:x', entry: { chatType: 'group' }, agentId: 'main', mainKey: 'x' }, { now: T0 })).toBe(false)
    expect(oc.registerSessionStateWatch({ watcherSessionKey: M, targetSessionKey: M })).toBe(false)
    expect(oc.registerSessionStateWatch({ watcherSessionKey: 'global', targetSessionKey: CHILD })).toBe(false)
    expect(oc.hasSessionStateWatchers(CHILD)).toBe(true)
    expect([...oc.listAmbientGroupWatchTargets(M)]).toEqual([GROUP])
    const rows = oc.getSessionStateStore().cursorRows({ watcherKey: M })
    expect(rows.map((r) => [r.targetKey, r.provenance, r.updatedAt])).toEqual([
      [GROUP, 'ambient-group', T0],
      [CHILD, 'explicit', T0],
    ])
    oc.handleSessionStateSessionDeleted(GROUP, 'main')
    expect([...oc.listAmbientGroupWatchTargets(M)]).toEqual([])
    oc.handleSessionStateSessionReset(M)
    expect(oc.hasSessionStateWatchers(CHILD)).toBe(false)
    expect(errors).toEqual([])
  })

  test('recordSessionHumanDirectMessage records only a human, and only when someone watches', () => {
    configure()
    expect(oc.recordSessionHumanDirectMessage({ sessionKey: CHILD, actor: { actorType: 'human' } }, { now: T0 })).toBeUndefined()
    expect(oc.recordSessionHumanDirectMessage({ sessionKey: CHILD, entry: { spawnedBy: M }, actor: { actorType: 'agent' } }, { now: T0 })).toBeUndefined()
    const e = oc.recordSessionHumanDirectMessage(
      { sessionKey: CHILD, entry: { spawnedBy: M, sessionId: 'sid' }, actor: { actorType: 'human', actorId: 'h:1' }, channel: ' telegram ' },
      { now: T0 },
    )
    expect(e).toEqual({
      sequence: 1,
      sessionKey: CHILD,
      sessionId: 'sid',
      agentId: 'main',
      kind: 'human_direct_message',
      actorType: 'human',
      actorId: 'h:1',
      occurredAt: T0,
      summary: 'human message via telegram',
    })
    // The spawner got a cursor, so the next message without an entry is recorded too.
    expect(oc.recordSessionHumanDirectMessage({ sessionKey: CHILD, actor: { actorType: 'human' } }, { now: T0 + 1 })?.summary).toBe(
      'human message via unknown',
    )
  })

  test('the producer helpers record OpenClaw\'s kinds, summaries and dedupe keys', async () => {
    configure()
    oc.recordSubagentSpawned({ childSessionKey: CHILD, agentId: 'main', requesterSessionKey: M, childRunId: 'r1' })
    oc.recordSubagentSpawned({ childSessionKey: CHILD, agentId: 'main', requesterSessionKey: M, childRunId: 'r1' })
    oc.recordSubagentTerminalState({ childSessionKey: CHILD, requesterSessionKey: M, runId: 'r1', outcomeStatus: 'timeout' })
    oc.recordSessionCompacted({ sessionKey: CHILD, operationId: 'op1' })
    oc.recordSessionCompacted({ operationId: 'op2' })
    await oc.recordSessionGoalChanged({ sessionKey: CHILD, entry: { spawnedBy: M }, summary: 'new goal', actor: { type: 'human', id: 'h' } })
    const events = oc.listSessionStateEventsSince(CHILD, 'main', 0).events
    expect(events.map((e) => [e.kind, e.actorType, e.actorId ?? null, e.runId ?? null, e.summary, e.payload ?? null])).toEqual([
      ['child_spawned', 'agent', M, 'r1', 'child session spawned', null],
      ['run_failed', 'system', null, 'r1', 'child run timed out', { outcome: 'timeout' }],
      ['compacted', 'system', null, null, 'session compacted', null],
      ['goal_changed', 'human', 'h', null, 'new goal', null],
    ])
    const cursor = oc.getSessionStateStore().cursorRows({ watcherKey: M, targetKey: CHILD })
    // The repeated spawn spent sequence 2 (SQLite numbers an insert its dedupe turns into nothing).
    expect(events.map((e) => e.sequence)).toEqual([1, 3, 4, 5])
    expect(cursor.map((r) => [r.lastSeen, r.notified, r.material])).toEqual([[1, 5, 5]])
  })

  test('the automatic prune follows OpenClaw\'s hour on the call clock, and expires history past 30 days', () => {
    configure()
    oc.recordSessionStateEvent({ sessionKey: CHILD, agentId: 'main', kind: 'created', actorType: 'system', summary: 'old' }, { now: T0 })
    oc.recordSessionStateEvent({ sessionKey: 'agent:main:x', agentId: 'main', kind: 'created', actorType: 'system', summary: 'new' }, { now: T0 + 31 * DAY })
    const since = oc.listSessionStateEventsSince(CHILD, 'main', 0, 200, { now: T0 + 31 * DAY })
    expect(since).toEqual({ events: [], truncated: false, earliestAvailableSequence: 2, historyGap: true })
    expect(oc.getSessionStateVersion(CHILD, 'main')).toBe(1)
  })
})

describe('notices reach the host as OpenClaw enqueues them', () => {
  type Enqueued = [string, oc.SystemEventOptions]
  let queued: Enqueued[] = []
  let woken: oc.SessionEventWake[] = []
  const text = (target: string, since: number) =>
    `Session "${target}" changed (other actor). Reconcile before acting: session_status sessionKey "${target}" changesSince ${since}.`
  const ctx = (target: string) => `session-state:${Buffer.from(target, 'utf8').toString('hex')}`

  function configureHost(host: oc.HostServices = {}): void {
    queued = []
    woken = []
    configure({
      enqueueSystemEvent: (t, o) => queued.push([t, o]),
      requestSessionEventWake: (w) => woken.push(w),
      ...host,
    })
  }

  test('an explicit watcher: one system event and one wake, before the record returns', () => {
    configureHost()
    oc.registerSessionStateWatch({ watcherSessionKey: M, targetSessionKey: CHILD }, { now: T0 })
    const e = oc.recordSessionStateEvent(
      { sessionKey: CHILD, agentId: 'main', kind: 'human_direct_message', actorType: 'human', summary: 'hi' },
      { now: T0 + 1 },
    )
    const seenInside = queued.length
    expect(e?.sequence).toBe(1)
    expect(seenInside).toBe(1)
    expect(queued).toEqual([[text(CHILD, 0), { sessionKey: M, sessionStorePath: '/stores/main.sqlite', contextKey: ctx(CHILD) }]])
    expect(woken).toEqual([
      {
        source: 'session-state',
        intent: 'immediate',
        reason: `session-state:${CHILD}`,
        sessionKey: M,
        sessionStorePath: '/stores/main.sqlite',
        coalesceMs: 20_000,
      },
    ])
  })

  test('an ambient group watch replaces and never wakes; a nested watcher is queued without a wake', () => {
    configureHost()
    oc.registerMainSessionGroupWatch({ sessionKey: GROUP, agentId: 'main' }, { now: T0 })
    oc.registerSessionStateWatch({ watcherSessionKey: CHILD, targetSessionKey: GROUP }, { now: T0 })
    oc.recordSessionStateEvent({ sessionKey: GROUP, agentId: 'main', kind: 'goal_changed', actorType: 'system', summary: 'g' }, { now: T0 + 1 })
    expect(queued).toEqual([
      [text(GROUP, 0), { sessionKey: M, sessionStorePath: '/stores/main.sqlite', contextKey: ctx(GROUP), replace: true }],
      [text(GROUP, 0), { sessionKey: CHILD, sessionStorePath: '/stores/main.sqlite', contextKey: ctx(GROUP) }],
    ])
    expect(woken).toEqual([])
  })

  test('self-suppression, log-only kinds and a spawn queue nothing', () => {
    configureHost()
    oc.recordSubagentSpawned({ childSessionKey: CHILD, agentId: 'main', requesterSessionKey: M, childRunId: 'r' })
    // The producer helpers take no options: they run on the system clock, as in OpenClaw.
    oc.recordSessionStateEvent({
      sessionKey: CHILD,
      agentId: 'main',
      kind: 'goal_changed',
      actorType: 'agent',
      actorId: M,
      summary: 's',
      watcherSessionKeys: [M],
    })
    oc.recordSubagentTerminalState({ childSessionKey: CHILD, requesterSessionKey: M, runId: 'r', outcomeStatus: 'ok' })
    expect(queued).toEqual([])
    expect(oc.getSessionStateStore().cursorRows().map((r) => [r.lastSeen, r.notified, r.material, r.scope])).toEqual([
      [1, 1, 1, '/stores/main.sqlite'],
    ])
  })

  test('a named watcher whose cursor is bound to another store gets no notice and its cursor stays', () => {
    let store = '/stores/old.sqlite'
    configureHost({ resolvePhysicalSessionStorePath: () => store })
    oc.registerSessionStateWatch({ watcherSessionKey: M, targetSessionKey: CHILD }, { now: T0 })
    store = '/stores/new.sqlite'
    oc.recordSessionStateEvent(
      { sessionKey: CHILD, agentId: 'main', kind: 'human_direct_message', actorType: 'human', summary: 's', watcherSessionKeys: [M] },
      { now: T0 + 1 },
    )
    expect(queued).toEqual([])
    expect(oc.getSessionStateStore().cursorRows().map((r) => [r.lastSeen, r.notified, r.material, r.scope, r.updatedAt])).toEqual([
      [0, 0, 0, '/stores/old.sqlite', T0],
    ])
    // Registering again binds it to the watcher's current store, seeded at the head.
    expect(oc.registerSessionStateWatch({ watcherSessionKey: M, targetSessionKey: CHILD }, { now: T0 + 2 })).toBe(true)
    expect(oc.getSessionStateStore().cursorRows().map((r) => [r.lastSeen, r.notified, r.material, r.scope, r.updatedAt])).toEqual([
      [1, 1, 1, '/stores/new.sqlite', T0 + 2],
    ])
  })

  test('acknowledge moves only current cursors; material history since the notice reopens it', () => {
    let current = true
    configureHost({ isSystemEventStoreCurrent: () => current })
    oc.registerSessionStateWatch({ watcherSessionKey: M, targetSessionKey: CHILD }, { now: T0 })
    for (let i = 0; i < 2; i++) {
      oc.recordSessionStateEvent({ sessionKey: CHILD, agentId: 'main', kind: 'human_direct_message', actorType: 'human', summary: 's' }, { now: T0 + 1 })
    }
    current = false
    oc.acknowledgeSessionStateNotices(M, [CHILD], { now: T0 + 2 })
    expect(oc.getSessionStateStore().cursorRows().map((r) => [r.lastSeen, r.notified, r.material])).toEqual([[0, 1, 2]])
    current = true
    queued = []
    oc.acknowledgeSessionStateNotices(M, [CHILD, CHILD], { now: T0 + 3 })
    expect(oc.getSessionStateStore().cursorRows().map((r) => [r.lastSeen, r.notified, r.material, r.updatedAt])).toEqual([[1, 2, 2, T0 + 3]])
    expect(queued).toEqual([[text(CHILD, 1), { sessionKey: M, sessionStorePath: '/stores/main.sqlite', contextKey: ctx(CHILD) }]])
    // A cursor with nothing pending: acknowledging restarts its expiry, as OpenClaw stamps it.
    oc.acknowledgeSessionStateNotices(M, [CHILD], { now: T0 + 4 })
    oc.acknowledgeSessionStateNotices(M, [CHILD], { now: T0 + 5 })
    expect(oc.getSessionStateStore().cursorRows().map((r) => [r.lastSeen, r.notified, r.material, r.updatedAt])).toEqual([[2, 2, 2, T0 + 5]])
  })

  test('sweep re-queues for watchers whose session entry exists and restarts their cursors\' expiry', () => {
    const host: oc.HostServices = {
      loadSessionEntryReadOnly: ({ sessionKey }) => (sessionKey === M ? { sessionId: 'm' } : undefined),
    }
    configureHost(host)
    const file = path.join(stateDir, 'state', 'session-state.sqlite')
    oc.registerSessionStateWatch({ watcherSessionKey: M, targetSessionKey: CHILD }, { now: T0 })
    oc.registerSessionStateWatch({ watcherSessionKey: 'agent:main:gone', targetSessionKey: CHILD }, { now: T0 })
    oc.recordSessionStateEvent({ sessionKey: CHILD, agentId: 'main', kind: 'human_direct_message', actorType: 'human', summary: 's' }, { now: T0 + 1 })
    // A restart: the same file opened again, an empty queue until the sweep.
    queued = []
    woken = []
    oc.configureSessionState({
      path: file,
      host: {
        enqueueSystemEvent: (t, o) => queued.push([t, o]),
        requestSessionEventWake: (w) => woken.push(w),
        resolvePhysicalSessionStorePath: () => '/stores/main.sqlite',
        ...host,
      },
    })
    const later = T0 + 29 * DAY
    oc.sweepSessionStateWatchNotices({ now: later })
    expect(queued).toEqual([[text(CHILD, 0), { sessionKey: M, sessionStorePath: '/stores/main.sqlite', contextKey: ctx(CHILD) }]])
    expect(woken.map((w) => w.sessionKey)).toEqual([M])
    expect(oc.getSessionStateStore().cursorRows().map((r) => [r.watcherKey, r.lastSeen, r.notified, r.material, r.updatedAt])).toEqual([
      ['agent:main:gone', 0, 1, 1, T0 + 1],
      [M, 0, 1, 1, later],
    ])
    // Past the others' retention, the sweep's prune keeps the cursor it just re-queued.
    oc.sweepSessionStateWatchNotices({ now: T0 + 31 * DAY })
    expect(oc.getSessionStateStore().cursorRows().map((r) => [r.watcherKey, r.updatedAt])).toEqual([[M, T0 + 31 * DAY]])
  })

  test('a pending notice the host queue lost is handed over again at the next material event, as OpenClaw enqueues', () => {
    configureHost()
    oc.registerSessionStateWatch({ watcherSessionKey: M, targetSessionKey: CHILD }, { now: T0 })
    const hdm = { sessionKey: CHILD, agentId: 'main', kind: 'human_direct_message' as const, actorType: 'human' as const, summary: 's' }
    oc.recordSessionStateEvent(hdm, { now: T0 + 1 })
    // The turn took the event and ended before acknowledging it.
    queued = []
    woken = []
    oc.recordSessionStateEvent(hdm, { now: T0 + 2 })
    const handed = [text(CHILD, 0), { sessionKey: M, sessionStorePath: '/stores/main.sqlite', contextKey: ctx(CHILD) }]
    expect(queued).toEqual([handed])
    expect(woken.map((w) => [w.sessionKey, w.reason])).toEqual([[M, `session-state:${CHILD}`]])
    // Not for a log-only kind, a repeated dedupe key, or the actor's own change.
    queued = []
    oc.recordSessionStateEvent({ ...hdm, kind: 'compacted' }, { now: T0 + 3 })
    oc.recordSessionStateEvent({ ...hdm, dedupeKey: 'd' }, { now: T0 + 4 })
    expect(queued).toEqual([handed])
    queued = []
    oc.recordSessionStateEvent({ ...hdm, dedupeKey: 'd' }, { now: T0 + 5 })
    oc.recordSessionStateEvent({ ...hdm, actorId: M }, { now: T0 + 6 })
    expect(queued).toEqual([])
    // A sweep hands every pending notice over again, as OpenClaw's does, also one the store still holds.
    queued = []
    woken = []
    oc.sweepSessionStateWatchNotices({ now: T0 + 7 })
    expect(queued).toEqual([handed])
    expect(woken.map((w) => w.sessionKey)).toEqual([M])
    // M is the last material event the watcher did not cause: 4 (5 was spent by the dedupe hit,
    // 6 is M's own); the sweep re-froze N at it.
    expect(oc.getSessionStateStore().cursorRows().map((r) => [r.lastSeen, r.notified, r.material])).toEqual([[0, 4, 4]])
  })

  test('a host service that throws while a notice is handed over is reported, and the call goes on', () => {
    configureHost({
      enqueueSystemEvent: () => {
        throw new Error('queue down')
      },
    })
    oc.registerSessionStateWatch({ watcherSessionKey: M, targetSessionKey: CHILD }, { now: T0 })
    const e = oc.recordSessionStateEvent(
      { sessionKey: CHILD, agentId: 'main', kind: 'human_direct_message', actorType: 'human', summary: 's' },
      { now: T0 + 1 },
    )
    expect(e?.sequence).toBe(1)
    expect(errors.map((x) => x.code)).toEqual(['ERR_HOST_CALLBACK'])
    expect(woken).toEqual([])
  })
})

describe('upstream links, as the catalog of OpenClaw writes and reads them', () => {
  const CLAUDE = {
    sessionKey: CHILD,
    agentId: 'main',
    catalogId: 'claude',
    hostId: 'gateway:local',
    threadId: 't1',
    upstreamKind: 'claude-cli',
    upstreamRef: { filePath: '/t/1.jsonl' },
    marker: { offset: 1 },
  }

  test('upsert keeps the marker and last scan while the source is unchanged, and resets them when it changes', () => {
    configure()
    expect(oc.upsertSessionUpstreamLink(CLAUDE, { now: T0 })).toBe(true)
    expect(oc.updateSessionUpstreamLinkMarker(CHILD, 'main', { offset: 9 }, { now: T0 + 1 })).toBe(true)
    expect(oc.upsertSessionUpstreamLink({ ...CLAUDE, marker: { offset: 5 } }, { now: T0 + 2 })).toBe(true)
    expect(oc.readSessionUpstreamLink(CHILD, 'main')).toEqual({
      ...CLAUDE,
      marker: { offset: 9 },
      lastScannedAt: T0 + 1,
      createdAt: T0,
      updatedAt: T0 + 2,
    })
    expect(oc.upsertSessionUpstreamLink({ ...CLAUDE, threadId: 't2' }, { now: T0 + 3 })).toBe(true)
    const moved = oc.readSessionUpstreamLink(CHILD, 'main')
    expect(moved).toEqual({ ...CLAUDE, threadId: 't2', createdAt: T0, updatedAt: T0 + 3 })
    expect(oc.upsertSessionUpstreamLink(CLAUDE, { now: T0 + 4, ifAbsent: true })).toBe(false)
    expect(oc.readSessionUpstreamLink(CHILD, 'main')).toEqual(moved)
    expect(oc.readSessionUpstreamLink(CHILD, 'ops')).toBeUndefined()
  })

  test('the marker moves only while updatedAt is the expected one', () => {
    configure()
    oc.upsertSessionUpstreamLink(CLAUDE, { now: T0 })
    expect(oc.updateSessionUpstreamLinkMarker(CHILD, 'main', { uuid: 'u' }, { now: T0 + 1, expectedUpdatedAt: T0 - 1 })).toBe(false)
    expect(oc.updateSessionUpstreamLinkMarker(CHILD, 'main', { uuid: 'u' }, { now: T0 + 1, expectedUpdatedAt: T0 })).toBe(true)
    expect(oc.readSessionUpstreamLink(CHILD, 'main')?.marker).toEqual({ uuid: 'u' })
    expect(oc.updateSessionUpstreamLinkMarker(M, 'main', { uuid: 'u' })).toBe(false)
  })

  test('delete with expected: changed, deleted, then absent; the watched list groups by catalog', async () => {
    configure()
    oc.upsertSessionUpstreamLink(CLAUDE, { now: T0 })
    oc.upsertSessionUpstreamLink({ ...CLAUDE, sessionKey: 'agent:main:subagent:b', catalogId: 'codex' }, { now: T0 })
    oc.upsertSessionUpstreamLink({ ...CLAUDE, sessionKey: GROUP }, { now: T0 })
    oc.registerSessionStateWatch({ watcherSessionKey: M, targetSessionKey: CHILD }, { now: T0 })
    oc.registerSessionStateWatch({ watcherSessionKey: M, targetSessionKey: 'agent:main:subagent:b' }, { now: T0 })
    const watched = await oc.listWatchedSessionUpstreamLinks()
    expect([...watched.entries()].map(([c, links]) => [c, links.map((l) => l.sessionKey)])).toEqual([
      ['claude', [CHILD]],
      ['codex', ['agent:main:subagent:b']],
    ])
    const link = oc.readSessionUpstreamLink(CHILD, 'main') as oc.SessionUpstreamLink
    expect(oc.deleteSessionUpstreamLink(CHILD, 'main', { expected: { ...link, updatedAt: 1 } })).toBe('changed')
    expect(oc.deleteSessionUpstreamLink(CHILD, 'main', { expected: link })).toBe('deleted')
    expect(oc.deleteSessionUpstreamLink(CHILD, 'main', { expected: link })).toBe('absent')
    expect(oc.deleteSessionUpstreamLink(GROUP, 'main')).toBe('deleted')
    expect(oc.readSessionUpstreamLink(GROUP, 'main')).toBeUndefined()
    // Deleting a session deletes its link too.
    oc.handleSessionStateSessionDeleted('agent:main:subagent:b', 'main')
    expect(oc.readSessionUpstreamLink('agent:main:subagent:b', 'main')).toBeUndefined()
    expect(errors).toEqual([])
  })
})
