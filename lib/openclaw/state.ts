/**
 * OpenClaw 2026.9.6's session-state API over the store (its producers are in producers.ts). Every function keeps OpenClaw's
 * contract: it never throws, it reports a failure through `onError` and returns OpenClaw's
 * default. `options.now` is the store's clock for the call.
 * @packageDocumentation
 */
import type { ActorType, ChangeEvent, CursorRow, EventKind, RecordInput, StateEvent, WatchOptions } from '../types'
import { adapter, atTime, forward, report, tracking } from './host'
import type { Adapter } from './host'
import { deleteSessionUpstreamLink } from './links'
import { cursorRows } from './reads'
import type {
  RegisterMainSessionGroupWatchParams,
  RegisterSessionStateWatchParams,
  SessionStateCallOptions,
  SessionStateEvent,
  SessionStateEventInput,
  SessionStateEventsSince,
  SessionStateVersionRef,
} from './types'

/** OpenClaw prunes behind a record when its last prune is more than an hour old. */
const PRUNE_INTERVAL_MS = 3_600_000

function nowOf(options: SessionStateCallOptions | undefined): number {
  return options?.now ?? Date.now()
}

/** A store event in OpenClaw's shape (its members in OpenClaw's order). */
function toOpenClaw(e: ChangeEvent): SessionStateEvent {
  // OpenClaw answers a row of a kind it does not know with the stored string under its own
  // kind type, and leaves out a payload that is not a JSON object: so does the adapter (the
  // foreign row's `payloadText` and `foreign` are the core API's, not OpenClaw's).
  return {
    sequence: e.sequence,
    sessionKey: e.sessionKey,
    ...(e.sessionId !== undefined ? { sessionId: e.sessionId } : {}),
    agentId: e.agentId,
    kind: e.kind as EventKind,
    actorType: e.actorType as ActorType,
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
    // OpenClaw drops a blank named watcher (no cursor can hold it); the store refuses one.
    const named = input.watcherSessionKeys?.filter((k) => typeof k !== 'string' || k.trim() !== '')
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
      // A blank key holds no version the store can read (it refuses one): left out.
      if (!ref.sessionKey || ref.sessionKey.trim() === '') continue
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
