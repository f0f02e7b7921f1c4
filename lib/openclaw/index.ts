/**
 * `session-awareness/openclaw`: OpenClaw 2026.9.6's session-state API (the functions of its
 * `session-state-events` module, with their parameters and results) over the store. A gateway
 * calls {@link configureSessionState} once with its host services, then uses these functions
 * where it used OpenClaw's own. Like OpenClaw's, no function throws: a failure goes to
 * `onError` and the function returns OpenClaw's default.
 * @packageDocumentation
 */
export {
  adapterClock,
  closeSessionState,
  configureSessionState,
  defaultStatePath,
  getSessionStateStore,
  openClawStoreOptions,
  resolveStateDir,
} from './host'
export type {
  ConfigureSessionStateOptions,
  HostServices,
  SessionEventWake,
  SessionStoreScope,
  SystemEventOptions,
} from './host'
export {
  acknowledgeSessionStateNotices,
  getSessionStateVersion,
  getSessionStateVersions,
  handleSessionStateSessionDeleted,
  handleSessionStateSessionReset,
  hasSessionStateWatchers,
  listAmbientGroupWatchTargets,
  listSessionStateEventsSince,
  pruneSessionStateEvents,
  recordSessionStateEvent,
  registerMainSessionGroupWatch,
  registerSessionStateWatch,
  sweepSessionStateWatchNotices,
} from './state'
export {
  classifySessionStateActor,
  decodeSessionStateNoticeContextKey,
  recordSessionCompacted,
  recordSessionGoalChanged,
  recordSessionHumanDirectMessage,
  recordSubagentSpawned,
  recordSubagentTerminalState,
} from './producers'
export {
  deleteSessionUpstreamLink,
  listWatchedSessionUpstreamLinks,
  readSessionUpstreamLink,
  updateSessionUpstreamLinkMarker,
  upsertSessionUpstreamLink,
} from './links'
export type { SessionUpstreamLink, SessionUpstreamLinkInput, SessionUpstreamLinkWriteOptions } from './links'
export {
  DEFAULT_AGENT_ID,
  buildAgentMainSessionKey,
  classifySessionKind,
  isSubagentSessionKey,
  normalizeAgentId,
  parseAgentSessionKey,
  resolveAgentIdFromSessionKey,
} from './keys'
export type { ParsedAgentSessionKey, SessionKind, SessionKindEntry } from './keys'
export type * from './types'
