/**
 * The public shapes of the API, each written once.
 * @packageDocumentation
 */

/**
 * The kinds of a state event. `human_direct_message`, `goal_changed` and `upstream_missing`
 * notify watchers; `child_spawned` seeds the producer-named watchers' cursors; the rest are
 * log only.
 */
export const EventKind = {
  /** A human wrote into the session directly. Notifies. */
  HumanDirectMessage: 'human_direct_message',
  /** The session's goal changed. Notifies. */
  GoalChanged: 'goal_changed',
  /** The session's upstream is gone. Notifies. */
  UpstreamMissing: 'upstream_missing',
  /** The session was spawned by another; seeds the named watchers' cursors. */
  ChildSpawned: 'child_spawned',
  /** A run completed. Log only. */
  RunCompleted: 'run_completed',
  /** A run failed. Log only. */
  RunFailed: 'run_failed',
  /** The transcript was compacted. Log only. */
  Compacted: 'compacted',
  /** The session was adopted from another tool's catalog. Log only. */
  Adopted: 'adopted',
  /** The session was created. Log only. */
  Created: 'created',
} as const

/** The kind of a state event: one of the values of {@link EventKind}. */
export type EventKind = (typeof EventKind)[keyof typeof EventKind]

/**
 * A kind this version does not know, as a foreign row may hold one
 * (semantics.md#reading-foreign-events). At run time it is the kind as stored, an ordinary
 * string. Its type is a marker no string literal matches (a string ending in U+0000, which no
 * kind holds), so that comparing a read's kind with a misspelt known kind (`case
 * 'human_direct_mesage':`, `e.kind === 'run_complete'`) does not compile while the string
 * methods stay at hand. To compare with a kind this version does not know, use
 * `String(event.kind)`.
 */
export type UnknownKind = `${string}\u0000`

/** Who caused an event. */
export const ActorType = {
  /** A person. */
  Human: 'human',
  /** An agent session. */
  Agent: 'agent',
  /** The gateway itself. */
  System: 'system',
} as const

/** Who caused an event: one of the values of {@link ActorType}. */
export type ActorType = (typeof ActorType)[keyof typeof ActorType]

/**
 * Where a cursor came from: `explicit` watchers that are main-like are woken;
 * `ambient-group` cursors are queue-only.
 */
export const Provenance = {
  /** A watch the host asked for, or a producer-named watcher. */
  Explicit: 'explicit',
  /** A watch implied by a group; queue-only. */
  AmbientGroup: 'ambient-group',
} as const

/** Where a cursor came from: one of the values of {@link Provenance}. */
export type Provenance = (typeof Provenance)[keyof typeof Provenance]

/** One event of the signal log. Absent optional fields are omitted, never null. */
export interface StateEvent {
  /** The global sequence (unique, increasing, never reused). */
  sequence: number
  /** The session it belongs to. */
  sessionKey: string
  /** The agent it belongs to. */
  agentId: string
  /** What happened. */
  kind: EventKind
  /** Who caused it. */
  actorType: ActorType
  /** The causing session or person. */
  actorId?: string
  /** The run that produced it. */
  runId?: string
  /** The session id of the session. */
  sessionId?: string
  /** When it happened (epoch ms). */
  occurredAt: number
  /** One line of at most 240 characters. */
  summary: string
  /** Metadata, if any. */
  payload?: Record<string, unknown>
  /** Never present on an event the store wrote: it tells a {@link ForeignStateEvent} apart. */
  foreign?: never
}

/**
 * A field of a stored event row that differs from what the store writes
 * (semantics.md#reading-foreign-events).
 */
export type ForeignField =
  | 'sequence'
  | 'kind'
  | 'actorType'
  | 'actorId'
  | 'runId'
  | 'sessionId'
  | 'occurredAt'
  | 'summary'
  | 'payload'

/**
 * A stored event row the store would not write itself (another writer's row, an older or a
 * later version's), as reads answer it (semantics.md#reading-foreign-events): never notified,
 * but never left out of a delta. Text that is not valid UTF-8 is decoded lossily; the summary
 * is made one line and cut to 240 characters as `record` does; an unknown kind or actor type
 * is kept as stored; a payload that is not a JSON object is kept as `payloadText`.
 */
export interface ForeignStateEvent {
  /** The global sequence. */
  sequence: number
  /** The session it belongs to. */
  sessionKey: string
  /** The agent it belongs to. */
  agentId: string
  /** The kind as stored: maybe one this version does not know. */
  kind: EventKind | UnknownKind
  /** The actor type as stored. */
  actorType: string
  /** The causing session or person, when present and not empty. */
  actorId?: string
  /** The run that produced it, likewise. */
  runId?: string
  /** The session id of the session, likewise. */
  sessionId?: string
  /** When it happened (epoch ms); truncated when stored as a fraction, 0 when not a number. */
  occurredAt: number
  /** One line of at most 240 characters, made so as `record` makes it. */
  summary: string
  /** The payload, when the stored one is a JSON object (of any size). */
  payload?: Record<string, unknown>
  /** The stored payload text, when it is not a JSON object (an array, a scalar, not JSON). */
  payloadText?: string
  /** The fields that differ from what the store writes, never empty, in this type's order. */
  foreign: ForeignField[]
}

/** One event row of a read: an event the store wrote, or a foreign row in its safe form. */
export type ChangeEvent = StateEvent | ForeignStateEvent

/** What `record` stores (semantics.md#api). `null` for an optional field means absent. */
export interface RecordInput {
  /** The session the event belongs to (non-empty). */
  sessionKey: string
  /** The agent; defaults to the key's own, else `main`. For a qualified key it must equal the key's agent. */
  agentId?: string | null
  /** The session id (transcript), if known. */
  sessionId?: string | null
  /** What happened. */
  kind: EventKind
  /** Who caused it. */
  actorType: ActorType
  /** The causing session: a watcher equal to it is not notified (self-suppression). */
  actorId?: string | null
  /** The run that produced it. */
  runId?: string | null
  /** One line: CRLF, CR, LF, U+2028 and U+2029 each become one space; the first 240 Unicode scalar values are kept; no trim. */
  summary: string
  /**
   * Metadata only: a JSON object of at most 4096 UTF-8 bytes as compact JSON; null is absent.
   * Typed `object` so that a value typed by an interface (`interface Turn { turns: number }`)
   * is accepted; an array or any other value that is not a plain object is `ERR_INVALID_ARG`.
   */
  payload?: object | null
  /** Epoch ms: floored and clamped to [now - 24h, now]; missing or non-finite is now. */
  occurredAt?: number | null
  /** A second record with the same key returns the first row and changes nothing; '' is absent. */
  dedupeKey?: string | null
  /** Producer-named watchers (the spawning parent). Bare keys and the target itself are dropped. */
  watchers?: string[] | null
  /** Write nothing, and return null silently, when no cursor targets the session and no usable watcher is given. */
  onlyIfWatched?: boolean | null
  /**
   * The watcher scope of each watcher the caller knows, by watcher key (semantics.md#cursors-scope):
   * a cursor created for a named watcher, or re-seeded by `child_spawned`, is bound to its scope;
   * for a notify kind, a watcher's cursor bound to another scope (or none) is left alone and
   * opens no notice. Each scope is a non-empty string of at most 4,096 UTF-8 bytes.
   */
  watcherScopes?: Record<string, string> | null
}

/** A pending stale-state notice for a watcher. */
export interface Notice {
  /** The watcher session. */
  watcherKey: string
  /** The session that changed. */
  targetKey: string
  /** The version to reconcile from: pass it to `changesSince`. */
  changesSince: number
  /** The one-line, byte-stable notice text. */
  text: string
  /** `session-state:` + hex of the target key, for hosts that dedupe on a context key. */
  contextKey: string
  /** The watcher scope the cursor is bound to, when it has one (semantics.md#cursors-scope). */
  scope?: string
}

/**
 * A notice as it entered the queue, as the `onNotice` listener receives it
 * (semantics.md#notices-listener).
 */
export type QueuedNotice = Notice & {
  /** True when the store wakes the watcher for it: an `explicit` cursor of a main-like watcher. */
  wake: boolean
  /** True for an `ambient-group` cursor: the notice waits for the watcher's next turn, no wake. */
  queueOnly: boolean
}

/** Options of `acknowledge`. */
export interface AcknowledgeOptions {
  /**
   * Acknowledge only the cursors bound to this watcher scope; a cursor bound to another scope,
   * or to none, stays pending (semantics.md#cursors-scope).
   */
  scope?: string | null
  /**
   * The watcher has read the targets up to this sequence: the last event `changesSince`
   * returned (a non-negative safe integer). A notice whose material events are all at or
   * below it is withdrawn, reopened or not, and the watcher's scheduled wake with it when
   * nothing else is queued; a partial read leaves one notice naming `through`; a `through` at
   * or below the notice's position acknowledges nothing. Without it, the acknowledge consumes
   * the notice and reopens one for events after its frozen position
   * (semantics.md#cursors-acknowledge).
   */
  through?: number | null
}

/** The events of one session after a version. */
export interface StateChanges {
  /**
   * Every stored event row with `sequence > after`, ascending, at most `limit`; a row the
   * store would not write itself is a {@link ForeignStateEvent} (test `e.foreign`).
   */
  events: ChangeEvent[]
  /** True when more events exist past `limit`. */
  truncated: boolean
  /** The smallest retained sequence of the session, else head + 1 when head > 0, else 0. */
  earliestAvailableSequence: number
  /**
   * True when `after` predates retained history, or a stored row could not be answered:
   * refresh the whole session state instead.
   */
  historyGap: boolean
}

/** The result of `changesSince`. */
export interface ChangesSince {
  /** The session's state version. */
  stateVersion: number
  /** The delta. */
  stateChanges: StateChanges
}

/** Names the agent of a session: the key's own agent by default, else `main`. */
export interface AgentOptions {
  /** The agent of the session; defaults to the key's own, else `main`. */
  agentId?: string | null
}

/** Options of `changesSince`. */
export interface ChangesSinceOptions extends AgentOptions {
  /** At most this many events: floored and clamped to [1, 200]; default 200. */
  limit?: number | null
}

/** Options of `watch`. */
export interface WatchOptions {
  /** `explicit` (default) or `ambient-group`. */
  provenance?: Provenance | null
  /**
   * The watcher scope to bind the cursor to (semantics.md#cursors-scope): a cursor bound to
   * another scope, or to none, is re-seeded at the target's head with this scope and
   * `provenance`, its pending notice dropped. Absent: an existing cursor's scope is left alone.
   */
  scope?: string | null
  /**
   * Whether re-registering an existing cursor (same scope) refreshes its expiry. Default true;
   * false leaves `updated_at` as it was, as OpenClaw's registration does.
   */
  refresh?: boolean | null
}

/** A session named for `stateVersions`. */
export interface SessionRef {
  /** The session key. */
  sessionKey: string
  /** The agent; defaults to the key's own, else `main`. */
  agentId?: string | null
}

/** One entry of `stateVersions`. */
export interface SessionVersion {
  /** The session key. */
  sessionKey: string
  /** The agent. */
  agentId: string
  /** Its state version (always > 0 here). */
  stateVersion: number
}

/** The request passed to the `wake` callback. */
export interface WakeRequest {
  /** Always `session-state`. */
  source: 'session-state'
  /** Always `immediate`. */
  intent: 'immediate'
  /** `session-state:<target>`: the target whose notice made the wake due. */
  reason: string
  /** The watcher session to wake. */
  sessionKey: string
}

/** What a prune removed. */
export interface PruneReport {
  /** Events deleted. */
  eventsDeleted: number
  /** Cursors expired. */
  cursorsDeleted: number
}

/** The result of `sweep`. */
export interface SweepReport {
  /** Cursors whose notice is pending after the sweep. */
  notices: number
  /** The prune that followed. */
  prune: PruneReport
}

/** Options of `sweep`. */
export interface SweepOptions {
  /** Asked once per watcher with unacknowledged history; false skips it. Default: all exist. */
  watcherExists?: ((watcherKey: string) => boolean) | null
}

/** Where an adopted session lives upstream. */
export interface UpstreamLink {
  /** The catalog it came from, such as `claude`; used in summaries (`human message via claude`). */
  source: string
  /** A local JSONL transcript, scanned by the upstream monitor. */
  transcriptPath?: string | null
  /** A session on a paired node, checked by the host and reported with `checkUpstream`. */
  remoteId?: string | null
  /** The agent of the session; defaults to the key's own, else `main`. */
  agentId?: string | null
  /**
   * Where the upstream session lives, in OpenClaw's terms: `gateway:local` (the default with
   * `transcriptPath`) or `node:<id>` for a paired node (`remote` when not given).
   */
  hostId?: string | null
}

/** The result of the host's probe of a remote upstream. */
export type RemoteCheckResult =
  | { found: true; items: Array<Record<string, unknown>> }
  | { found: false }
  | { found: 'unknown' }

/** Options of `startUpstreamMonitor`. */
export interface UpstreamMonitorOptions {
  /** How often watched adopted sessions are scanned. Default 5000; a positive integer up to 2^31 - 1. */
  intervalMs?: number | null
}

/** Which cursor rows `cursorRows` reads: a watcher's, a target's, or one pair's. */
export interface CursorRowFilter {
  /** Only this watcher's rows. */
  watcherKey?: string | null
  /** Only rows on this target. */
  targetKey?: string | null
}

/** One cursor row, every column as stored. */
export interface CursorRow {
  /** The watching session. */
  watcherKey: string
  /** The watched session. */
  targetKey: string
  /** L: the acknowledged position. */
  lastSeen: number
  /** N: the frozen notified position. */
  notified: number
  /** M: the latest material event. */
  material: number
  /** The provenance as stored (`explicit`, `ambient-group`). */
  provenance: string
  /** The watcher's scope (OpenClaw's `watcher_store_path`), when the row has one. */
  scope?: string
  /** Last write of the row (epoch ms). */
  updatedAt: number
}
