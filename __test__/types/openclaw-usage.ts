// Type test of the `session-awareness/openclaw` subpath: compiled with `tsc --noEmit`, never
// run. It calls OpenClaw's names the way a gateway does, and every `@ts-expect-error` line
// proves that the types refuse a mistake. The package test compiles this same file against
// the installed package, as CommonJS (.cts) and as an ES module (.mts).
import {
  acknowledgeSessionStateNotices,
  classifySessionStateActor,
  configureSessionState,
  decodeSessionStateNoticeContextKey,
  getSessionStateStore,
  getSessionStateVersion,
  getSessionStateVersions,
  listAmbientGroupWatchTargets,
  listSessionStateEventsSince,
  recordSessionGoalChanged,
  recordSessionHumanDirectMessage,
  recordSessionStateEvent,
  recordSubagentSpawned,
  registerMainSessionGroupWatch,
  registerSessionStateWatch,
  sweepSessionStateWatchNotices,
  upsertSessionUpstreamLink,
  type HostServices,
  type SessionStateEvent,
  type SessionStateEventsSince,
  type SystemEventOptions,
} from 'session-awareness/openclaw'

const queued: [string, SystemEventOptions][] = []
const host: HostServices = {
  enqueueSystemEvent: (text, options) => queued.push([text, options]),
  requestSessionEventWake: (w) => w.coalesceMs,
  loadSessionEntryReadOnly: ({ sessionKey }) => (sessionKey ? {} : undefined),
}
configureSessionState({ path: '/tmp/session-state.sqlite', host, onError: (e) => e.code })

const event: SessionStateEvent | undefined = recordSessionStateEvent(
  { sessionKey: 'agent:main:subagent:a', agentId: 'main', kind: 'human_direct_message', actorType: 'human', summary: 's' },
  { now: Date.now() },
)
const sequence: number | undefined = event?.sequence
// @ts-expect-error: agentId is required, as in OpenClaw
recordSessionStateEvent({ sessionKey: 'k', kind: 'compacted', actorType: 'system', summary: 's' })
// @ts-expect-error: an unknown kind
recordSessionStateEvent({ sessionKey: 'k', agentId: 'main', kind: 'nope', actorType: 'system', summary: 's' })

recordSubagentSpawned({ childSessionKey: 'c', agentId: 'main', requesterSessionKey: 'p', childRunId: 'r' })
const goal: Promise<void> = recordSessionGoalChanged({ sessionKey: 'c', entry: { spawnedBy: 'p' }, summary: 'g' })
recordSessionHumanDirectMessage({ sessionKey: 'c', actor: { actorType: 'human' } })
const watched: boolean = registerSessionStateWatch({ watcherSessionKey: 'p', targetSessionKey: 'c' })
registerMainSessionGroupWatch({ sessionKey: 'agent:main:group:g', agentId: 'main' })
acknowledgeSessionStateNotices('p', ['c'])
sweepSessionStateWatchNotices({ now: 1 })
const since: SessionStateEventsSince = listSessionStateEventsSince('c', 'main', 0, 50)
const version: number = getSessionStateVersion('c', 'main')
const versions: Record<string, Record<string, number>> = getSessionStateVersions([{ sessionKey: 'c' }])
const ambient: Set<string> = listAmbientGroupWatchTargets('p')
const target: string | undefined = decodeSessionStateNoticeContextKey('session-state:61')
const actor = classifySessionStateActor({ inputProvenance: { kind: 'inter_session', sourceSessionKey: 'p' } })
// @ts-expect-error: the actor type is a closed union
const wrong: 'robot' = actor.actorType
const rows = getSessionStateStore().cursorRows({ watcherKey: 'p' })
// @ts-expect-error: getSessionStateVersion takes the agent as its second argument
getSessionStateVersion('c', { agentId: 'main' })

const linked: boolean = upsertSessionUpstreamLink({
  sessionKey: 'c',
  agentId: 'main',
  catalogId: 'claude',
  hostId: 'gateway:local',
  threadId: 't',
  upstreamKind: 'claude-cli',
  upstreamRef: { filePath: '/t.jsonl' },
  marker: null,
})
// @ts-expect-error: the link's agent is required
upsertSessionUpstreamLink({ sessionKey: 'c', catalogId: 'claude', hostId: 'h', threadId: 't', upstreamKind: 'k', upstreamRef: 1, marker: 1 })

export { ambient, linked, goal, rows, sequence, since, target, version, versions, watched, wrong }
