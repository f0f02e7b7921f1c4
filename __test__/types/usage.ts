// Type test: compiled with `tsc --noEmit`, never run. It uses the public API the way a
// gateway does, and every `@ts-expect-error` line proves that the types refuse a mistake
// (an unused one is itself an error). The package test compiles this same file against the
// installed package, as CommonJS (.cts) and as an ES module (.mts).
import {
  EventKind as EventKinds,
  SessionState,
  SessionStateError,
  decodeNoticeContextKey,
  encodeNoticeContextKey,
  inspectDatabase,
  readEvents,
  type ActorType,
  type ChangeEvent,
  type ChangesSince,
  type ForeignField,
  type DatabaseInspection,
  type ErrorCode,
  type EventKind,
  type Notice,
  type Provenance,
  type QueuedNotice,
  type SessionEvents,
  type SessionStateStats,
  type StateEvent,
  type WakeRequest,
} from 'session-awareness'

const woken: WakeRequest[] = []
const state = new SessionState('/tmp/state.sqlite', {
  retentionMs: 30 * 24 * 3600 * 1000,
  maxEvents: 50_000,
  busyTimeoutMs: 30_000,
  wakeCoalesceMs: 250,
  wake: (req) => {
    const source: 'session-state' = req.source
    const intent: 'immediate' = req.intent
    woken.push({ source, intent, reason: req.reason, sessionKey: req.sessionKey })
  },
  onError: (err) => {
    const code: ErrorCode = err.code
    const message: string = err.message
    const typed: SessionStateError = err
    // @ts-expect-error a code outside the union
    const bogus: typeof code = 'ERR_BOGUS'
    // Which call or background task failed.
    const during: string | undefined = err.during
    return [code, message, typed, bogus, during]
  },
  clock: () => Date.now(),
  strict: false,
  notifyKinds: ['human_direct_message', 'goal_changed', 'upstream_missing', 'run_completed'],
  seedResetsProvenance: true,
  onNotice: (n: QueuedNotice) => {
    const wake: boolean = n.wake
    const queueOnly: boolean = n.queueOnly
    const scope: string | undefined = n.scope
    void [wake, queueOnly, scope, n.text]
  },
})
// @ts-expect-error notifyKinds holds event kinds
new SessionState('/tmp/state.sqlite', { notifyKinds: ['human'] })

const event: StateEvent | null = state.record({
  sessionKey: 'agent:main:subagent:c',
  kind: 'human_direct_message',
  actorType: 'human',
  summary: 'human message via telegram',
  payload: { channel: 'telegram' },
  occurredAt: Date.now(),
  dedupeKey: 'telegram:42',
  watchers: ['agent:main:main'],
  onlyIfWatched: false,
  watcherScopes: { 'agent:main:main': '/state/agents/main/agent/openclaw-agent.sqlite' },
})
if (event) {
  const kind: EventKind = event.kind
  const actor: ActorType = event.actorType
  const sequence: number = event.sequence
  const payload: Record<string, unknown> | undefined = event.payload
  // @ts-expect-error the payload is an object, not `any`
  const wrong: number = event.payload
  void [kind, actor, sequence, payload, wrong]
}

state.record({ sessionKey: 'k', kind: EventKinds.GoalChanged, actorType: 'human', summary: 's' })

// A payload typed by an interface (no index signature) is accepted, as a plain object is.
interface Turn {
  turns: number
  channel: string
}
const turn: Turn = { turns: 3, channel: 'telegram' }
state.record({ sessionKey: 'k', kind: 'created', actorType: 'system', summary: 's', payload: turn })
void state.recordAsync({ sessionKey: 'k', kind: 'created', actorType: 'system', summary: 's', payload: turn })
// @ts-expect-error a payload is an object, not a string
state.record({ sessionKey: 'k', kind: 'created', actorType: 'system', summary: 's', payload: 'text' })

// A misspelt known kind does not compile where a read's kind is compared; an unknown kind of a
// foreign row is reached through `String(kind)`.
function describeKind(e: ChangeEvent): string {
  switch (e.kind) {
    case 'human_direct_message':
      return 'human'
    // @ts-expect-error a misspelt known kind
    case 'goal_chnaged':
      return 'goal'
    default:
      return String(e.kind) === 'a_kind_of_a_later_version' ? 'later' : 'other'
  }
}
// @ts-expect-error a misspelt known kind, compared
const misspelt = (e: ChangeEvent): boolean => e.kind === 'run_complete'
void [describeKind, misspelt]

// The CLI's codes are codes of the union too.
const cliCodes: ErrorCode[] = ['ERR_USAGE', 'ERR_UNEXPECTED', 'ERR_FOREIGN_SCHEMA', 'ERR_HOST_CALLBACK']
void cliCodes
try {
  state.watch('agent:main:main', 'agent:main:subagent:c')
} catch (e) {
  if (e instanceof SessionStateError && e.code === 'ERR_CLOSED') throw e
}
// @ts-expect-error an unknown kind
state.record({ sessionKey: 'k', kind: 'bogus', actorType: 'human', summary: 's' })
// @ts-expect-error an unknown actor type
state.record({ sessionKey: 'k', kind: 'created', actorType: 'robot', summary: 's' })
// @ts-expect-error the summary is required
state.record({ sessionKey: 'k', kind: 'created', actorType: 'system' })

const provenance: Provenance = 'ambient-group'
const watching: boolean = state.watch('agent:main:main', 'agent:main:subagent:c', { provenance })
// @ts-expect-error an unknown provenance
state.watch('agent:main:main', 'agent:main:subagent:c', { provenance: 'implicit' })
state.watch('agent:main:main', 'agent:main:subagent:c', { scope: '/state/a.sqlite', refresh: false })
const removed: boolean = state.unwatch('agent:main:main', 'agent:main:subagent:c')

const notices: Notice[] = state.drain('agent:main:main')
for (const n of notices) {
  const delta: ChangesSince = state.changesSince(n.targetKey, n.changesSince, { limit: 50 })
  const gap: boolean = delta.stateChanges.historyGap
  const events: ChangeEvent[] = delta.stateChanges.events
  // @ts-expect-error a read may hold foreign rows, whose kind is any string
  const onlyStored: StateEvent[] = delta.stateChanges.events
  for (const e of events) {
    if (e.foreign === undefined) {
      const known: EventKind = e.kind // narrowed to StateEvent
      void known
    } else {
      const fields: ForeignField[] = e.foreign
      const raw: string | undefined = e.payloadText
      // @ts-expect-error a foreign row's kind is not narrowed to EventKind
      const known: EventKind = e.kind
      void [fields, raw, known]
    }
  }
  void [gap, events, onlyStored, n.text, n.contextKey, n.watcherKey]
}
const peeked: Notice[] = state.peek('agent:main:main')
const acked: number = state.acknowledge('agent:main:main', ['agent:main:subagent:c'])
const ackedIn: number = state.acknowledge('agent:main:main', ['agent:main:subagent:c'], { scope: '/state/a.sqlite' })
const ackedThrough: number = state.acknowledge('agent:main:main', ['agent:main:subagent:c'], { through: 4 })
const scopeOfFirst: string | undefined = peeked[0]?.scope
const version: number = state.stateVersion('agent:main:subagent:c', { agentId: 'main' })
const versions = state.stateVersions([{ sessionKey: 'agent:main:subagent:c' }])
const agentOfFirst: string | undefined = versions[0]?.agentId
const swept = state.sweep({ watcherExists: (key) => key.startsWith('agent:') })
const pruned: number = swept.prune.eventsDeleted + state.prune().cursorsDeleted + swept.notices
const adopted: StateEvent | null = state.adopt('agent:main:claude-1', {
  source: 'claude',
  transcriptPath: '/home/me/.claude/projects/x/1.jsonl',
})
state.noteOwnUserMessage('agent:main:claude-1', 'please continue')
const probed: StateEvent | null = state.checkUpstream('agent:main:node-7', {
  found: true,
  items: [{ type: 'user', message: { role: 'user', content: 'hi' } }],
})
state.checkUpstream('agent:main:node-7', { found: 'unknown' })
// @ts-expect-error a probe result is found: true | false | 'unknown'
state.checkUpstream('agent:main:node-7', { found: 'maybe' })
const scanned: StateEvent[] = state.scanUpstream()
state.startUpstreamMonitor({ intervalMs: 5000 })
state.stopUpstreamMonitor()
void [adopted, probed, scanned]
state.resetSession('agent:main:main')
state.deleteSession('agent:main:subagent:c')
state.deleteSession('agent:ops:subagent:c', { agentId: 'ops' })
// @ts-expect-error the agent is an option, not a positional argument
state.stateVersion('agent:main:subagent:c', 'main')
// @ts-expect-error the agent is an option, not a positional argument
state.deleteSession('agent:main:subagent:c', 'main')
state.close()

// The Promise API: the same arguments, the same results, as promises.
async function promised(): Promise<number> {
  const s: SessionState = await SessionState.open('/tmp/state.sqlite', { strict: true })
  const recorded: StateEvent | null = await s.recordAsync({
    sessionKey: 'agent:main:subagent:c',
    kind: 'goal_changed',
    actorType: 'human',
    summary: 'new goal',
  })
  // @ts-expect-error an unknown kind
  void s.recordAsync({ sessionKey: 'k', kind: 'bogus', actorType: 'human', summary: 's' })
  // @ts-expect-error a promise, not an event
  const notAwaited: StateEvent | null = s.recordAsync({ sessionKey: 'k', kind: 'created', actorType: 'system', summary: 's' })
  const w: boolean = await s.watchAsync('agent:main:main', 'agent:main:subagent:c', { provenance: 'explicit' })
  const u: boolean = await s.unwatchAsync('agent:main:main', 'agent:main:subagent:c')
  const n: number = await s.acknowledgeAsync('agent:main:main', ['agent:main:subagent:c'])
  const delta: ChangesSince = await s.changesSinceAsync('agent:main:subagent:c', 0, { limit: 10 })
  const vs = await s.stateVersionsAsync([{ sessionKey: 'agent:main:subagent:c' }])
  const sweep = await s.sweepAsync({ watcherExists: () => true })
  const prune = await s.pruneAsync()
  const a: StateEvent | null = await s.adoptAsync('agent:main:claude-1', { source: 'claude', remoteId: 'r' })
  const c: StateEvent | null = await s.checkUpstreamAsync('agent:main:claude-1', { found: false })
  const noted: void = await s.noteOwnUserMessageAsync('agent:main:claude-1', 'sent by the gateway')
  const scanned: StateEvent[] = await s.scanUpstreamAsync()
  await s.resetSessionAsync('agent:main:main')
  await s.deleteSessionAsync('agent:main:subagent:c', { agentId: 'main' })
  await s.closeAsync()
  void [recorded, notAwaited, w, u, delta, a, c, noted, scanned]
  return n + (vs[0]?.stateVersion ?? 0) + sweep.notices + prune.eventsDeleted
}

// A store on PostgreSQL: the same class, opened on a URL with its four options.
async function onPostgres(): Promise<number> {
  const s = await SessionState.open('postgresql://gateway@db/app?sslmode=verify-full', {
    schema: 'session_awareness',
    connectTimeoutMs: 10_000,
    statementTimeoutMs: 30_000,
    hostName: 'gateway-1',
  })
  // @ts-expect-error the host name is a string
  void SessionState.open('postgres://db/app', { hostName: 1 })
  // @ts-expect-error the schema is a name, not a number
  void SessionState.open('postgres://db/app', { schema: 1 })
  const rows = await s.cursorRowsAsync({ watcherKey: 'agent:main:main' })
  const l: number = rows[0]?.lastSeen ?? 0
  const pg: DatabaseInspection = inspectDatabase('postgres://reader@db/app', { schema: 'session_awareness' })
  await s.closeAsync()
  return l + pg.counts.events
}
void onPostgres

const context: string = encodeNoticeContextKey('agent:main:subagent:c')
const target: string | null = decodeNoticeContextKey(context)

const report: DatabaseInspection = inspectDatabase('/tmp/state.sqlite')
for (const c of report.cursors) {
  const lnm: number[] = [c.lastSeen, c.notified, c.material, c.lag, c.targetVersion]
  const stored: string = c.provenance
  void [lnm, stored, c.pending]
}
const oldestKind: string | undefined = report.oldestEvent?.kind
const history: SessionEvents = readEvents('/tmp/state.sqlite', 'agent:main:subagent:c', {
  since: 0,
  agentId: 'main',
})
// @ts-expect-error `since` is a number
readEvents('/tmp/state.sqlite', 'agent:main:subagent:c', { since: '0' })

const stats: SessionStateStats = state.stats()
const counted: number[] = [
  stats.eventsRecorded.human_direct_message,
  stats.recordFailures.ERR_DB,
  stats.noticesOpened.reopen,
  stats.recordDuration.async.sum,
  stats.walBytes,
]
// @ts-expect-error counters are by event kind
void stats.eventsRecorded.human
new SessionState('/tmp/state.sqlite', { meterProvider: null })
// @ts-expect-error a MeterProvider, not a string
new SessionState('/tmp/state.sqlite', { meterProvider: 'otel' })

export const used = [
  watching, removed, peeked, acked, version, agentOfFirst, pruned, target, oldestKind,
  history.events.length, report.counts.events, woken, ackedIn, ackedThrough, scopeOfFirst, promised, counted,
]
