/**
 * OpenClaw 2026.9.6's session-state API over the store. Every function keeps OpenClaw's
 * contract: it never throws, it reports a failure through `onError` and returns OpenClaw's
 * default. `options.now` is the store's clock for the call.
 * @packageDocumentation
 */
import { decodeNoticeContextKey } from '../context-key'
import type { CursorRow, RecordInput, StateEvent, WatchOptions } from '../types'
import { adapter, atTime, forward, report, tracking } from './host'
import type { Adapter } from './host'
import { deleteSessionUpstreamLink } from './links'
import { cursorRows } from './reads'
import type {
  ClassifySessionStateActorInput,
  RegisterMainSessionGroupWatchParams,
  RegisterSessionStateWatchParams,
  SessionCompactedParams,
  SessionGoalChangedParams,
  SessionHumanDirectMessageParams,
  SessionStateActor,
  SessionStateCallOptions,
  SessionStateEvent,
  SessionStateEventInput,
  SessionStateEventsSince,
  SessionStateVersionRef,
  SubagentSpawnedParams,
  SubagentTerminalStateParams,
} from './types'

/** OpenClaw prunes behind a record when its last prune is more than an hour old. */
const PRUNE_INTERVAL_MS = 3_600_000

function nowOf(options: SessionStateCallOptions | undefined): number {
  return options?.now ?? Date.now()
}

/** A store event in OpenClaw's shape (its members in OpenClaw's order). */
function toOpenClaw(e: StateEvent): SessionStateEvent {
  return {
    sequence: e.sequence,
    sessionKey: e.sessionKey,
    ...(e.sessionId !== undefined ? { sessionId: e.sessionId } : {}),
    agentId: e.agentId,
    kind: e.kind,
    actorType: e.actorType,
    ...(e.actorId !== undefined ? { actorId: e.actorId } : {}),
    ...(e.runId !== undefined ? { runId: e.runId } : {}),
    occurredAt: e.occurredAt,
    summary: e.summary,
    ...(e.payload !== undefined ? { payload: e.payload } : {}),
  }
}

function pruneAt(a: Adapter, now: number): void {
  try {
    atTime(now, () => a.store.prune())
    a.lastPruneAt = now
  } catch (e) {
    report(e)
  }
}

/** The kinds whose events notify watchers (OpenClaw 2026.9.6's table, the store's default). */
const NOTIFY_KINDS: ReadonlySet<string> = new Set(['human_direct_message', 'goal_changed', 'upstream_missing'])

/**
 * OpenClaw enqueues a cursor's notice at every material update, also while it is pending;
 * its queue drops the repeat, unless the host's queue lost the entry (a turn that took it and
 * ended before acknowledging). The store hands a pending notice over once, when it enters its
 * queue. So, after a new event of a notify kind, the notices of the target's cursors that this
 * event updated but did not open are handed over again, with their wakes, as OpenClaw does.
 */
function requeuePending(a: Adapter, event: StateEvent, actorId: string | undefined, handed: Set<string>): void {
  const rows = a.store
    .cursorRows({ targetKey: event.sessionKey })
    .filter((r) => r.material === event.sequence && r.notified !== event.sequence && r.watcherKey !== actorId)
  handOverAgain(a, rows, handed)
}

/** Hands the queued notices of `rows` to the host again, except those `handed` over already. */
function handOverAgain(a: Adapter, rows: CursorRow[], handed: Set<string>): void {
  for (const r of rows) {
    if (r.notified === r.lastSeen || handed.has(`${r.watcherKey}\u0000${r.targetKey}`)) continue
    const notice = a.store.peek(r.watcherKey).find((n) => n.targetKey === r.targetKey)
    if (notice === undefined) continue
    const queueOnly = r.provenance === 'ambient-group'
    forward({
      ...notice,
      ...(r.scope !== undefined ? { scope: r.scope } : {}),
      queueOnly,
      wake: !queueOnly && !a.host.isSubagentSessionKey(r.watcherKey),
    })
  }
}

/**
 * Appends one event without letting a failure reach the caller: the event, its head and its
 * cursors in one transaction, then each notice to the host's queue (and a wake). Returns the
 * stored event (the first one for a repeated `dedupeKey`), or undefined on failure.
 */
export function recordSessionStateEvent(
  input: SessionStateEventInput,
  options: SessionStateCallOptions = {},
): SessionStateEvent | undefined {
  const now = nowOf(options)
  try {
    const a = adapter()
    const named = input.watcherSessionKeys
    const scopes = input.watcherStorePaths ?? a.host.captureSessionWatcherStorePaths(named, options.env)
    const record: RecordInput = {
      sessionKey: input.sessionKey,
      agentId: input.agentId,
      sessionId: input.sessionId,
      kind: input.kind,
      actorType: input.actorType,
      actorId: input.actorId,
      runId: input.runId,
      summary: input.summary,
      payload: input.payload,
      occurredAt: input.occurredAt,
      dedupeKey: input.dedupeKey,
      watchers: named,
      watcherScopes: scopes,
    }
    const notify = NOTIFY_KINDS.has(input.kind)
    const before = notify ? atTime(now, () => a.store.stateVersion(input.sessionKey, { agentId: input.agentId })) : 0
    const [event, handed] = tracking(() => atTime(now, () => a.store.record(record)))
    if (notify && event !== null && event.sequence > before) requeuePending(a, event, input.actorId, handed)
    if (now - a.lastPruneAt > PRUNE_INTERVAL_MS) pruneAt(a, now)
    return event === null ? undefined : toOpenClaw(event)
  } catch (e) {
    report(e)
    return undefined
  }
}

/** The session's state version (0 when it has none, or on failure). */
export function getSessionStateVersion(sessionKey: string, agentId: string, options: SessionStateCallOptions = {}): number {
  try {
    return atTime(nowOf(options), () => adapter().store.stateVersion(sessionKey, { agentId }))
  } catch (e) {
    report(e)
    return 0
  }
}

/**
 * The versions of many sessions, keyed agent → session key; sessions at 0 are left out. A
 * qualified key is read for its own agent, a bare one for the ref's agent (default `main`).
 */
export function getSessionStateVersions(
  refs: SessionStateVersionRef[],
  options: SessionStateCallOptions = {},
): Record<string, Record<string, number>> {
  const out: Record<string, Record<string, number>> = {}
  try {
    const a = adapter()
    const seen = new Set<string>()
    const pairs: { sessionKey: string; agentId: string }[] = []
    for (const ref of refs) {
      if (!ref.sessionKey) continue
      const parsed = a.host.parseAgentSessionKey(ref.sessionKey)
      const agentId = parsed ? a.host.resolveAgentIdFromSessionKey(ref.sessionKey) : (ref.agentId ?? 'main')
      const id = JSON.stringify([ref.sessionKey, agentId])
      if (seen.has(id)) continue
      seen.add(id)
      pairs.push({ sessionKey: ref.sessionKey, agentId })
    }
    if (pairs.length === 0) return out
    const versions = atTime(nowOf(options), () => a.store.stateVersions(pairs))
    for (const v of versions) (out[v.agentId] ??= {})[v.sessionKey] = v.stateVersion
  } catch (e) {
    report(e)
  }
  return out
}

/** The session's retained events after `afterSequence`, at most `limit` (clamped to [1, 200]); moves no cursor. */
export function listSessionStateEventsSince(
  sessionKey: string,
  agentId: string,
  afterSequence: number,
  limit = 200,
  options: SessionStateCallOptions = {},
): SessionStateEventsSince {
  try {
    // OpenClaw compares `sequence > after` in SQL: a negative position reads from the start,
    // and no retained history reaches below 0, so it is a gap.
    const after = afterSequence < 0 ? 0 : Math.floor(afterSequence)
    const { stateChanges } = atTime(nowOf(options), () =>
      adapter().store.changesSince(sessionKey, after, { agentId, limit: Math.max(1, Math.min(200, Math.floor(limit))) }),
    )
    return {
      events: stateChanges.events.map(toOpenClaw),
      truncated: stateChanges.truncated,
      earliestAvailableSequence: stateChanges.earliestAvailableSequence,
      historyGap: afterSequence < 0 || stateChanges.historyGap,
    }
  } catch (e) {
    report(e)
    return { events: [], truncated: false, earliestAvailableSequence: 0, historyGap: false }
  }
}

/** Restarts a cursor's expiry and changes nothing else: a re-watch with its own scope and provenance. */
function rewatch(a: Adapter, r: CursorRow): void {
  a.store.watch(r.watcherKey, r.targetKey, {
    provenance: r.provenance === 'ambient-group' ? 'ambient-group' : 'explicit',
    ...(r.scope !== undefined ? { scope: r.scope } : {}),
  })
}

/**
 * Acknowledges the watcher's notices on the targets, for cursors bound to the watcher's
 * current store: each pending one moves on, and reopens (queued again) when material events
 * arrived after its notice.
 */
export function acknowledgeSessionStateNotices(
  watcherSessionKey: string,
  targetSessionKeys: string[],
  options: SessionStateCallOptions = {},
): void {
  const now = nowOf(options)
  try {
    const a = adapter()
    const current = new Set<string>()
    const rows = cursorRows(a, { watcher: watcherSessionKey })
    for (const t of new Set(targetSessionKeys)) {
      const row = rows.get(t)
      if (row && a.host.isSystemEventStoreCurrent(watcherSessionKey, row.scope ?? null)) current.add(t)
    }
    if (current.size === 0) return
    atTime(now, () => {
      a.store.acknowledge(watcherSessionKey, [...current])
      // OpenClaw's acknowledge stamps `updated_at` on every current cursor it is given, pending
      // or not; the store's leaves a cursor with nothing pending alone. A re-watch with the
      // row's own scope and provenance restarts its expiry (and changes nothing else).
      for (const t of current) {
        const r = rows.get(t) as CursorRow
        if (r.notified !== r.lastSeen) continue
        rewatch(a, r)
      }
    })
  } catch (e) {
    report(e)
  }
}

/** The watcher session was reset: its cursors go (the history it watched stays). */
export function handleSessionStateSessionReset(sessionKey: string, options: SessionStateCallOptions = {}): void {
  try {
    atTime(nowOf(options), () => adapter().store.resetSession(sessionKey))
  } catch (e) {
    report(e)
  }
}

/** The session was deleted: its upstream link, its events and head for the agent, and every cursor it is part of. */
export function handleSessionStateSessionDeleted(
  sessionKey: string,
  agentId: string,
  options: SessionStateCallOptions = {},
): void {
  deleteSessionUpstreamLink(sessionKey, agentId)
  try {
    atTime(nowOf(options), () => adapter().store.deleteSession(sessionKey, { agentId }))
  } catch (e) {
    report(e)
  }
}

/**
 * Gateway start: re-queues the notice of every cursor with unacknowledged material history
 * whose watcher's session entry exists, then prunes.
 */
export function sweepSessionStateWatchNotices(options: SessionStateCallOptions = {}): void {
  const now = nowOf(options)
  try {
    const a = adapter()
    const exists = (sessionKey: string): boolean => {
      try {
        return Boolean(a.host.loadSessionEntryReadOnly({ sessionKey, clone: false, env: options.env }))
      } catch {
        return false
      }
    }
    atTime(now, () => {
      // OpenClaw's sweep stamps `updated_at` on every pending row it re-queues before it
      // prunes, so each one's expiry restarts; the store's re-freeze leaves `updated_at` alone.
      // A re-watch with the row's own scope and provenance restarts it first (and changes
      // nothing else), so the sweep's prune keeps the row as OpenClaw's does.
      const pending = a.store.cursorRows().filter((r) => r.material > r.lastSeen && exists(r.watcherKey))
      for (const r of pending) rewatch(a, r)
      const [, handed] = tracking(() => a.store.sweep({ watcherExists: exists }))
      // OpenClaw enqueues every pending notice again; the store's sweep skips one still in its
      // queue, which the host's queue may have lost (a turn that ended before acknowledging).
      const swept = new Set(pending.map((r) => `${r.watcherKey}\u0000${r.targetKey}`))
      handOverAgain(
        a,
        a.store.cursorRows().filter((r) => swept.has(`${r.watcherKey}\u0000${r.targetKey}`)),
        handed,
      )
    })
    a.lastPruneAt = now
  } catch (e) {
    report(e)
  }
}

/** Retention now: events older than 30 days, all but the newest 50,000, and idle cursors. */
export function pruneSessionStateEvents(options: SessionStateCallOptions = {}): void {
  try {
    pruneAt(adapter(), nowOf(options))
  } catch (e) {
    report(e)
  }
}

/** True when any cursor targets the session (false on failure). */
export function hasSessionStateWatchers(targetSessionKey: string, options: SessionStateCallOptions = {}): boolean {
  try {
    return atTime(nowOf(options), () => cursorRows(adapter(), { target: targetSessionKey }).size > 0)
  } catch (e) {
    report(e)
    return false
  }
}

/** The targets the watcher follows through ambient-group cursors (empty on failure). */
export function listAmbientGroupWatchTargets(watcherSessionKey: string, options: SessionStateCallOptions = {}): Set<string> {
  try {
    const rows = atTime(nowOf(options), () => cursorRows(adapter(), { watcher: watcherSessionKey }))
    return new Set([...rows.values()].filter((r) => r.provenance === 'ambient-group').map((r) => r.targetKey))
  } catch (e) {
    report(e)
    return new Set()
  }
}

/** `watch` bound to the watcher's store, without refreshing an existing cursor's expiry (OpenClaw's rule). */
function scopedWatch(a: Adapter, watcher: string, target: string, w: WatchOptions, now: number): boolean {
  return atTime(now, () => a.store.watch(watcher, target, w))
}

/**
 * Registers an explicit watcher of a target, bound to the watcher's current store: seeded at
 * the target's version; a cursor bound to another store is seeded again. False when the
 * watcher is the target or not agent-qualified, or on failure.
 */
export function registerSessionStateWatch(params: RegisterSessionStateWatchParams, options: SessionStateCallOptions = {}): boolean {
  try {
    const a = adapter()
    if (params.watcherSessionKey === params.targetSessionKey) return false
    if (a.host.parseAgentSessionKey(params.watcherSessionKey) == null) return false
    const scope = a.host.resolvePhysicalSessionStorePath({ sessionKey: params.watcherSessionKey, env: options.env })
    return scopedWatch(
      a,
      params.watcherSessionKey,
      params.targetSessionKey,
      { provenance: 'explicit', scope, refresh: false },
      nowOf(options),
    )
  } catch (e) {
    report(e)
    return false
  }
}

/**
 * Registers the agent's main session as an ambient watcher of a group session (queued
 * notices, no wake). False for a session that is not a group, for the main session itself,
 * and on failure; true when a cursor bound to the main session's store already exists.
 */
export function registerMainSessionGroupWatch(
  params: RegisterMainSessionGroupWatchParams,
  options: SessionStateCallOptions = {},
): boolean {
  try {
    const a = adapter()
    if (a.host.classifySessionKind(params.sessionKey, params.entry) !== 'group') return false
    const watcher = a.host.buildAgentMainSessionKey({ agentId: params.agentId, mainKey: params.mainKey })
    if (params.sessionKey === watcher) return false
    const scope = a.host.resolvePhysicalSessionStorePath({ sessionKey: watcher, env: options.env })
    if (cursorRows(a, { watcher }).get(params.sessionKey)?.scope === scope) return true
    return scopedWatch(a, watcher, params.sessionKey, { provenance: 'ambient-group', scope, refresh: false }, nowOf(options))
  } catch (e) {
    report(e)
    return false
  }
}

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
