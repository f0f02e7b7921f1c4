/**
 * The parameter and result shapes of OpenClaw 2026.9.6's session-state module, as the adapter
 * takes and returns them.
 * @packageDocumentation
 */
import type { ActorType, EventKind, Provenance } from '../types'

/** An environment: variable name → value (`process.env` by default). */
export type Environment = Record<string, string | undefined>

/** The options every OpenClaw call takes: the time of the call and the environment. */
export interface SessionStateCallOptions {
  /** The call's time in epoch ms (the store's clock for this call); default the system clock. */
  now?: number
  /** The environment host services read (`OPENCLAW_STATE_DIR`); default `process.env`. */
  env?: Environment
}

/** One event of the signal log, as OpenClaw returns it. */
export interface SessionStateEvent {
  /** The global sequence. */
  sequence: number
  /** The session. */
  sessionKey: string
  /** The session's transcript id, when recorded. */
  sessionId?: string
  /** The agent. */
  agentId: string
  /** What happened. */
  kind: EventKind
  /** Who did it. */
  actorType: ActorType
  /** Which actor, when known. */
  actorId?: string
  /** The run, when known. */
  runId?: string
  /** When it happened (epoch ms). */
  occurredAt: number
  /** One line for people. */
  summary: string
  /** Metadata, never message content. */
  payload?: Record<string, unknown>
}

/** The input of `recordSessionStateEvent`. */
export interface SessionStateEventInput {
  /** The session the event belongs to. */
  sessionKey: string
  /** The session's transcript id. */
  sessionId?: string
  /** The session's agent. */
  agentId: string
  /** What happened. */
  kind: EventKind
  /** Who did it. */
  actorType: ActorType
  /** Which actor; a watcher whose key it is is not notified of its own change. */
  actorId?: string
  /** The run. */
  runId?: string
  /** One line for people. */
  summary: string
  /** Metadata, never message content: a plain object (one typed by an interface too). */
  payload?: object
  /** When it happened; clamped into the last 24 hours. */
  occurredAt?: number
  /** A second event with the same key changes nothing and returns the first. */
  dedupeKey?: string
  /** Watchers named by the producer (a parent, a coordinator). */
  watcherSessionKeys?: string[]
  /** The named watchers' session stores; default: captured from the host. */
  watcherStorePaths?: Record<string, string>
}

/** The result of `listSessionStateEventsSince`. */
export interface SessionStateEventsSince {
  /** The events after the version, ascending. */
  events: SessionStateEvent[]
  /** True when more events follow. */
  truncated: boolean
  /** The smallest sequence the session still holds (its head + 1, or 0, when none). */
  earliestAvailableSequence: number
  /** True when part of the history after the version was pruned. */
  historyGap: boolean
}

/** A session to read the version of. */
export interface SessionStateVersionRef {
  /** The session. */
  sessionKey: string
  /** Its agent (OpenClaw reports every agent of the key). */
  agentId?: string
}

/** The parameters of `registerSessionStateWatch`. */
export interface RegisterSessionStateWatchParams {
  /** The watching session. */
  watcherSessionKey: string
  /** The watched session. */
  targetSessionKey: string
  /** The watched session's agent; default the key's own. */
  targetAgentId?: string
}

/** The session entry fields the adapter reads. */
export interface SessionEntryLike {
  /** The transcript id. */
  sessionId?: string
  /** The session that spawned this one. */
  spawnedBy?: string
  /** The parent session. */
  parentSessionKey?: string
  /** The chat type (`group`, `channel`, …). */
  chatType?: string
}

/** The parameters of `registerMainSessionGroupWatch`. */
export interface RegisterMainSessionGroupWatchParams {
  /** The group session. */
  sessionKey: string
  /** Its entry. */
  entry?: SessionEntryLike | null
  /** The agent whose main session watches. */
  agentId: string
  /** The agent's main key; default `main`. */
  mainKey?: string
}

/** The parameters of `recordSubagentSpawned`. */
export interface SubagentSpawnedParams {
  /** The child. */
  childSessionKey: string
  /** The child's agent. */
  agentId: string
  /** The parent, which watches the child from the spawn on. */
  requesterSessionKey: string
  /** The child's run. */
  childRunId: string
}

/** How a sub-agent run ended. */
export type SubagentOutcomeStatus = 'ok' | 'error' | 'timeout' | 'cancelled'

/** The parameters of `recordSubagentTerminalState`. */
export interface SubagentTerminalStateParams {
  /** The child. */
  childSessionKey: string
  /** The parent. */
  requesterSessionKey: string
  /** The run. */
  runId: string
  /** How it ended. */
  outcomeStatus: SubagentOutcomeStatus
}

/** The parameters of `recordSessionCompacted`. */
export interface SessionCompactedParams {
  /** The session; nothing is recorded without one. */
  sessionKey?: string
  /** Its transcript id. */
  sessionId?: string
  /** Its agent; default the key's own. */
  agentId?: string
  /** The run. */
  runId?: string
  /** The compaction's id: a second record of it changes nothing. */
  operationId: string
}

/** The parameters of `recordSessionGoalChanged`. */
export interface SessionGoalChangedParams {
  /** The session. */
  sessionKey: string
  /** Its entry: `spawnedBy`, else `parentSessionKey`, is notified. */
  entry: SessionEntryLike
  /** Its agent; default the key's own. */
  agentId?: string
  /** Who changed the goal; default the system. */
  actor?: { type?: ActorType; id?: string }
  /** One line for people. */
  summary: string
}

/** The parameters of `recordSessionHumanDirectMessage`. */
export interface SessionHumanDirectMessageParams {
  /** The session a human wrote into. */
  sessionKey: string
  /** Its entry: `spawnedBy`, else `parentSessionKey`, is notified. */
  entry?: SessionEntryLike | null
  /** Its agent; default the key's own. */
  agentId?: string
  /** The actor; nothing is recorded unless it is a human. */
  actor: { actorType: ActorType; actorId?: string }
  /** The run. */
  runId?: string
  /** A second message with the same key changes nothing. */
  dedupeKey?: string
  /** The channel, for the summary (`human message via <channel>`). */
  channel?: string
  /** Metadata: a plain object (one typed by an interface too). */
  payload?: object
  /** When it happened. */
  occurredAt?: number
}

/** The input of `classifySessionStateActor`. */
export interface ClassifySessionStateActorInput {
  /** Where the turn's input came from. */
  inputProvenance?: { kind?: string; sourceSessionKey?: string } | null
  /** Internal events of the turn. */
  internalEvents?: readonly unknown[] | null
  /** `internal` when the turn's effects are the system's. */
  sessionEffects?: string | null
  /** The human, when known. */
  humanActorId?: string | null
}

/** The result of `classifySessionStateActor`. */
export interface SessionStateActor {
  /** The actor's type. */
  actorType: ActorType
  /** The actor, when known. */
  actorId?: string
}

export type { Provenance }
