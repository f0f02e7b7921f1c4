/**
 * OpenClaw 2026.9.6's producers (the calls its gateway makes where a change happens) and its
 * pure helpers, over {@link recordSessionStateEvent}. None throws.
 * @packageDocumentation
 */
import { decodeNoticeContextKey } from '../context-key'
import { adapter, report } from './host'
import { hasSessionStateWatchers, recordSessionStateEvent } from './state'
import type {
  ClassifySessionStateActorInput,
  SessionCompactedParams,
  SessionGoalChangedParams,
  SessionHumanDirectMessageParams,
  SessionStateActor,
  SessionStateCallOptions,
  SessionStateEvent,
  SubagentSpawnedParams,
  SubagentTerminalStateParams,
} from './types'

/**
 * Records a human's message typed straight into a session, when someone watches it (its
 * spawner or parent, or any cursor). Nothing for a non-human actor.
 */
export function recordSessionHumanDirectMessage(
  params: SessionHumanDirectMessageParams,
  options: SessionStateCallOptions = {},
): SessionStateEvent | undefined {
  try {
    const watcher = params.entry?.spawnedBy ?? params.entry?.parentSessionKey
    if (params.actor.actorType !== 'human') return undefined
    if (!watcher && !hasSessionStateWatchers(params.sessionKey, options)) return undefined
    const a = adapter()
    return recordSessionStateEvent(
      {
        sessionKey: params.sessionKey,
        sessionId: params.entry?.sessionId,
        agentId: params.agentId ?? a.host.resolveAgentIdFromSessionKey(params.sessionKey),
        kind: 'human_direct_message',
        actorType: 'human',
        ...(params.actor.actorId ? { actorId: params.actor.actorId } : {}),
        runId: params.runId,
        ...(params.dedupeKey ? { dedupeKey: params.dedupeKey } : {}),
        summary: `human message via ${params.channel?.trim() || 'unknown'}`,
        payload: params.payload,
        ...(params.occurredAt === undefined ? {} : { occurredAt: params.occurredAt }),
        ...(watcher ? { watcherSessionKeys: [watcher] } : {}),
      },
      options,
    )
  } catch (e) {
    report(e)
    return undefined
  }
}

/** Records a child's spawn and seeds its parent's cursor at it. */
export function recordSubagentSpawned(params: SubagentSpawnedParams): void {
  recordSessionStateEvent({
    sessionKey: params.childSessionKey,
    agentId: params.agentId,
    kind: 'child_spawned',
    actorType: 'agent',
    actorId: params.requesterSessionKey,
    runId: params.childRunId,
    dedupeKey: `child-spawned:${params.childRunId}`,
    summary: 'child session spawned',
    watcherSessionKeys: [params.requesterSessionKey],
  })
}

const TERMINAL_SUMMARY = {
  ok: 'child run completed',
  error: 'child run failed',
  timeout: 'child run timed out',
  cancelled: 'child run cancelled',
} as const

/** Records how a child's run ended (`run_completed`, else `run_failed` with the outcome in its payload). */
export function recordSubagentTerminalState(params: SubagentTerminalStateParams): void {
  try {
    const ok = params.outcomeStatus === 'ok'
    recordSessionStateEvent({
      sessionKey: params.childSessionKey,
      agentId: adapter().host.resolveAgentIdFromSessionKey(params.childSessionKey),
      kind: ok ? 'run_completed' : 'run_failed',
      actorType: 'system',
      runId: params.runId,
      dedupeKey: `run-terminal:${params.runId}`,
      summary: TERMINAL_SUMMARY[params.outcomeStatus],
      ...(ok ? {} : { payload: { outcome: params.outcomeStatus } }),
      watcherSessionKeys: [params.requesterSessionKey],
    })
  } catch (e) {
    report(e)
  }
}

/** Records one compaction (once per `operationId`); nothing without a session key. */
export function recordSessionCompacted(params: SessionCompactedParams): void {
  if (!params.sessionKey) return
  try {
    recordSessionStateEvent({
      sessionKey: params.sessionKey,
      sessionId: params.sessionId,
      agentId: params.agentId ?? adapter().host.resolveAgentIdFromSessionKey(params.sessionKey),
      kind: 'compacted',
      actorType: 'system',
      runId: params.runId,
      dedupeKey: `compacted:${params.operationId}`,
      summary: 'session compacted',
    })
  } catch (e) {
    report(e)
  }
}

/** Records a goal change and notifies the session's spawner or parent. Resolves when recorded. */
export async function recordSessionGoalChanged(params: SessionGoalChangedParams): Promise<void> {
  try {
    const watcher = params.entry.spawnedBy ?? params.entry.parentSessionKey
    recordSessionStateEvent({
      sessionKey: params.sessionKey,
      sessionId: params.entry.sessionId,
      agentId: params.agentId ?? adapter().host.resolveAgentIdFromSessionKey(params.sessionKey),
      kind: 'goal_changed',
      actorType: params.actor?.type ?? 'system',
      ...(params.actor?.id ? { actorId: params.actor.id } : {}),
      summary: params.summary,
      ...(watcher ? { watcherSessionKeys: [watcher] } : {}),
    })
  } catch (e) {
    report(e)
  }
}

/**
 * The actor of a turn, from where its input came: another session's agent, the system
 * (internal input, internal events or effects), else a human (interactive input).
 */
export function classifySessionStateActor(opts: ClassifySessionStateActorInput): SessionStateActor {
  const source = opts.inputProvenance
  if (source?.kind === 'inter_session') {
    return { actorType: 'agent', ...(source.sourceSessionKey ? { actorId: source.sourceSessionKey } : {}) }
  }
  const internal =
    source?.kind === 'internal_system' || (opts.internalEvents?.length ?? 0) > 0 || opts.sessionEffects === 'internal'
  if (internal) return { actorType: 'system' }
  return { actorType: 'human', ...(opts.humanActorId ? { actorId: opts.humanActorId } : {}) }
}

/** The target key of a notice's context key, or undefined unless it is one. */
export function decodeSessionStateNoticeContextKey(contextKey: string): string | undefined {
  try {
    return decodeNoticeContextKey(contextKey) ?? undefined
  } catch {
    return undefined
  }
}
