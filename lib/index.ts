/**
 * session-awareness: session state awareness for agent gateways. A durable signal log, watch
 * cursors and one stale-state notice per change, over a Rust native addon.
 * @packageDocumentation
 */
import * as native from '../index.js'

export { SessionState } from './session-state'
export type { SessionStateOptions } from './session-state'
export type { FollowBatch, FollowOptions, Follower } from './follow'
export type { HistogramStats, RecordFailureCode, SessionStateStats, StoreKind } from './metrics'
export { SessionStateError } from './errors'
export type { BackgroundTask, ErrorCode } from './errors'
export { decodeNoticeContextKey, encodeNoticeContextKey } from './context-key'
export { inspectDatabase, readEvents } from './inspect'
export { importOpenClawState } from './import'
export type {
  ImportError,
  ImportOpenClawStateOptions,
  ImportProgress,
  ImportSummary,
  ImportTableSummary,
} from './import'
export type {
  DatabaseInspection,
  InspectOptions,
  InspectedCursor,
  InspectedEvent,
  InspectedSession,
  ReadEventsOptions,
  RowCounts,
  SessionEvents,
} from './inspect'
export { ActorType, EventKind, Provenance } from './types'
export type {
  AcknowledgeOptions,
  AgentOptions,
  ChangeEvent,
  ChangesSince,
  ChangesSinceOptions,
  CursorRow,
  CursorRowFilter,
  ForeignField,
  ForeignStateEvent,
  Notice,
  PruneReport,
  QueuedNotice,
  RecordInput,
  RemoteCheckResult,
  SessionRef,
  SessionVersion,
  StateChanges,
  StateEvent,
  SweepOptions,
  SweepReport,
  UnknownKind,
  UpstreamLink,
  UpstreamMonitorOptions,
  WakeRequest,
  WatchOptions,
} from './types'

/**
 * Which binding artifact the loader loaded: `'native'` for the native addon, otherwise the
 * platform triple of a WASI build.
 */
export const __napiBindingTarget: typeof native.__napiBindingTarget = native.__napiBindingTarget
