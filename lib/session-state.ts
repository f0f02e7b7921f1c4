/**
 * `SessionState`: the public class over the native store. It checks arguments, keeps the
 * best-effort rules of `record` and `adopt`, answers an empty `drain` from the queue's shared
 * signal words, and builds results from their packed form (`packed.ts`).
 * @packageDocumentation
 */
import { NativeSessionState } from '../index.js'
import * as a from './args'
import { SessionStateError, fromCode, fromNative } from './errors'
import { NoticeListener } from './notice-listener'
import * as packed from './packed'
import { payloadJson } from './payload'
import type {
  AcknowledgeOptions,
  AgentOptions,
  ChangesSince,
  ChangesSinceOptions,
  CursorRow,
  CursorRowFilter,
  EventKind,
  Notice,
  PruneReport,
  QueuedNotice,
  RecordInput,
  RemoteCheckResult,
  SessionRef,
  SessionVersion,
  StateEvent,
  SweepOptions,
  SweepReport,
  UpstreamLink,
  UpstreamMonitorOptions,
  WakeRequest,
  WatchOptions,
} from './types'

/** Options of the `SessionState` constructor. Every field is optional; null is absent. */
export interface SessionStateOptions {
  /** Events and cursors older than this are pruned. Default 30 days; an integer in [1, 9e12]. */
  retentionMs?: number | null
  /** At most this many events are kept. Default 50,000; a positive safe integer. */
  maxEvents?: number | null
  /** How long a write waits for another process's lock. Default 30,000; [0, 2^31 - 1]. */
  busyTimeoutMs?: number | null
  /** Called on the JS thread, after the call that made it due, to wake a main-like watcher. */
  wake?: ((req: WakeRequest) => void) | null
  /** How long a due wake waits to coalesce with others for the same watcher. Default 250; [0, 60000]. */
  wakeCoalesceMs?: number | null
  /**
   * Receives best-effort failures (a `record` that returned null, a throwing `wake`, a
   * background prune). Default: one line on stderr.
   */
  onError?: ((err: SessionStateError) => void) | null
  /** The clock, in epoch ms. Default: the system clock. Tests use it to travel in time. */
  clock?: (() => number) | null
  /** `record` and `adopt` throw instead of reporting. For tests and development. */
  strict?: boolean | null
  /**
   * How often, in ms, this process looks for notices opened by other processes sharing the
   * database file: a poll of `PRAGMA data_version`, nearly free when nothing changed.
   * Default 100; an integer in [0, 60000]; 0 turns cross-process delivery off.
   */
  syncIntervalMs?: number | null
  /**
   * Watchers this process serves from the start: notices opened for them by other processes
   * reach this process's `drain`/`peek` and `wake`. A watcher is also served once this
   * process drains, peeks or acknowledges for it, watches for it, or names it in a record's
   * `watchers`. Bare keys are ignored; an empty key is `ERR_INVALID_ARG`.
   */
  serveWatchers?: string[] | null
  /**
   * The event kinds that notify watchers (semantics.md#api-options). Default
   * `['human_direct_message', 'goal_changed', 'upstream_missing']`; `child_spawned` (a seed
   * kind) is `ERR_INVALID_ARG`. A gateway that wants `run_completed` and `run_failed` to
   * notify names them here.
   */
  notifyKinds?: EventKind[] | null
  /**
   * A `child_spawned` re-seed of an existing cursor makes it `explicit` instead of keeping its
   * provenance, as OpenClaw does (semantics.md#cursors-scope). Default false.
   */
  seedResetsProvenance?: boolean | null
  /**
   * Called on the JS thread once per notice entering the queue (semantics.md#notices-listener):
   * opened, reopened by an acknowledge, re-queued by a sweep, healed, or arrived from another
   * process for a served watcher. For a call on the JS thread it runs after the commit and
   * before that call returns, in queue order; notices queued by background work (the poll
   * for other processes, the upstream monitor) arrive on the next call or a timer tick. A
   * throwing listener is reported to `onError` as `ERR_NOTICE_CALLBACK`, never thrown into
   * the caller.
   */
  onNotice?: ((notice: QueuedNotice) => void) | null
}

type Report = (err: SessionStateError) => void

/**
 * Each store's native object, for the package's own modules that reach calls the class does
 * not expose (the OpenClaw adapter's link rows). Not exported from the package.
 * @internal
 */
export const natives = new WeakMap<SessionState, NativeSessionState>()

/**
 * The reporter of one store. It holds the host's callback only, never the store: the addon
 * keeps a strong reference to it, which must not keep the store alive.
 */
function reporter(onError: Report | undefined): Report {
  return (err) => {
    if (onError !== undefined) {
      try {
        onError(err)
        return
      } catch {
        // A throwing onError must not turn a best-effort report into a throw.
      }
    }
    process.stderr.write(`session-awareness: ${err.code}: ${err.message}\n`)
  }
}

/**
 * Session state awareness over one SQLite file: a durable signal log, watch cursors with one
 * coalesced stale-state notice per (watcher, target), and `changesSince` reconciliation.
 */
export class SessionState {
  readonly #native: NativeSessionState
  readonly #report: Report
  readonly #strict: boolean
  // The empty-drain answer: the queue's signal words over the addon's memory (undefined
  // until the first drain, null where the runtime refuses them), the value of word 1 when
  // `#served` was filled, and the watchers the addon has already checked and served.
  #words: Int32Array | null | undefined = undefined
  #unserved = 0
  readonly #served = new Set<string>()
  // The `onNotice` listener's delivery, when there is one.
  readonly #notices: NoticeListener | undefined

  /**
   * Opens (creating if needed) the store at `path`: a SQLite file of its own (for a gateway,
   * `<stateDir>/state/session-state.sqlite`). Other tables in it and its `user_version` are
   * left alone. A new file is created with mode 0600 and a missing directory with mode 0700.
   * Opening never prunes. Throws `ERR_INVALID_ARG` for a bad option, `ERR_DB` when the file
   * cannot be opened as a database, and `ERR_FILE_SHARED` when another SQLite library of this
   * process (`node:sqlite`, better-sqlite3) has the file open; a handle that appears later
   * makes every call that touches the file fail with `ERR_FILE_SHARED` (`record`: null and
   * `onError`) until the store is reopened.
   */
  constructor(path: string, options?: SessionStateOptions | null) {
    a.str(path, 'path')
    const o = a.opts(options) ?? {}
    const onError = a.optFn<Report>(o.onError, 'onError')
    const report = reporter(onError)
    const native = {
      retentionMs: a.optNum(o.retentionMs, 'retentionMs'),
      maxEvents: a.optNum(o.maxEvents, 'maxEvents'),
      busyTimeoutMs: a.optNum(o.busyTimeoutMs, 'busyTimeoutMs'),
      wakeCoalesceMs: a.optNum(o.wakeCoalesceMs, 'wakeCoalesceMs'),
      wake: a.optFn<(req: WakeRequest) => void>(o.wake, 'wake'),
      clock: a.optFn<() => number>(o.clock, 'clock'),
      syncIntervalMs: a.optNum(o.syncIntervalMs, 'syncIntervalMs'),
      serveWatchers: a.optStrArray(o.serveWatchers, 'serveWatchers'),
      notifyKinds: a.optStrArray(o.notifyKinds, 'notifyKinds'),
      seedResetsProvenance: a.optBool(o.seedResetsProvenance, 'seedResetsProvenance'),
      noticeOutbox: o.onNotice !== undefined && o.onNotice !== null,
      onError: (err: { code: string; message: string }) => report(fromCode(err.code, err.message)),
    }
    const onNotice = a.optFn<(notice: QueuedNotice) => void>(o.onNotice, 'onNotice')
    this.#strict = a.optBool(o.strict, 'strict') ?? false
    this.#report = report
    try {
      this.#native = new NativeSessionState(path, native)
    } catch (e) {
      throw fromNative(e)
    }
    natives.set(this, this.#native)
    if (onNotice !== undefined) {
      this.#initSignal()
      const every = native.syncIntervalMs || 100
      this.#notices = new NoticeListener(this.#native, this.#words ?? null, onNotice, report, every)
    }
  }

  /** A best-effort failure: thrown with `strict`, else reported; null either way. */
  #failed(e: unknown): null {
    const err = fromNative(e)
    if (this.#strict) throw err
    this.#report(err)
    return null
  }

  /**
   * Records one event (semantics.md#recording) in one write transaction: insert, head, cursors; then queues the
   * notices and schedules the wakes. Best-effort: never throws (unless `strict`); returns
   * null when nothing was recorded, with exactly one `onError` call giving the reason
   * (`ERR_INVALID_ARG`, `ERR_CLOSED`, `ERR_DB`). With `onlyIfWatched` and nobody watching it
   * returns null silently. A repeated `dedupeKey` returns the first row and changes nothing.
   */
  record(input: RecordInput): StateEvent | null {
    let p: packed.PackedEvent | null
    try {
      if (input === undefined || input === null) throw a.invalidInput('record needs an input object')
      if (typeof input !== 'object') throw a.invalidInput('input must be an object')
      const i = input as unknown as Record<string, unknown>
      p = this.#native.record(
        a.reqStr(i.sessionKey, 'sessionKey'),
        a.optStr(i.agentId, 'agentId'),
        a.optStr(i.sessionId, 'sessionId'),
        a.reqStr(i.kind, 'kind'),
        a.reqStr(i.actorType, 'actorType'),
        a.optStr(i.actorId, 'actorId'),
        a.optStr(i.runId, 'runId'),
        a.reqStr(i.summary, 'summary'),
        payloadJson(i.payload),
        a.optNum(i.occurredAt, 'occurredAt'),
        a.optStr(i.dedupeKey, 'dedupeKey'),
        a.optStrArray(i.watchers, 'watchers'),
        a.optBool(i.onlyIfWatched, 'onlyIfWatched') ?? false,
        a.optStrRecord(i.watcherScopes, 'watcherScopes'),
      )
    } catch (e) {
      this.#notices?.deliver()
      return this.#failed(e)
    }
    this.#notices?.deliver()
    return p === null ? null : packed.eventOf(p)
  }

  /**
   * Registers `watcherKey` as a watcher of `targetKey`, seeded at the target's current
   * version (earlier history never notifies). An existing cursor is kept (an
   * `ambient-group` one is promoted to `explicit`, never the reverse) and its expiry
   * refreshed unless `refresh` is false; with `scope`, a cursor bound to another scope is
   * re-seeded at the current version instead (semantics.md#cursors-scope). Returns false for
   * a bare watcher or target, or watcher == target.
   */
  watch(watcherKey: string, targetKey: string, options?: WatchOptions | null): boolean {
    a.str(watcherKey, 'watcherKey')
    a.str(targetKey, 'targetKey')
    const o = a.opts(options)
    const provenance = a.optStr(o?.provenance, 'provenance')
    const scope = a.optStr(o?.scope, 'scope')
    const refresh = a.optBool(o?.refresh, 'refresh')
    try {
      return this.#native.watch(watcherKey, targetKey, provenance, scope, refresh)
    } catch (e) {
      throw fromNative(e)
    } finally {
      this.#notices?.deliver()
    }
  }

  /** Removes the cursor and its pending notice. True if a cursor was removed. */
  unwatch(watcherKey: string, targetKey: string): boolean {
    a.str(watcherKey, 'watcherKey')
    a.str(targetKey, 'targetKey')
    try {
      return this.#native.unwatch(watcherKey, targetKey)
    } catch (e) {
      throw fromNative(e)
    }
  }

  /**
   * The cursor rows of a watcher and/or a target, every column as stored (all rows when both
   * are absent), ordered by watcher, then target. Moves nothing; for hosts that answer
   * questions about watches (who watches a session, which targets a watcher follows).
   */
  cursorRows(filter?: CursorRowFilter | null): CursorRow[] {
    const o = a.opts(filter)
    const watcherKey = a.optStr(o?.watcherKey, 'watcherKey')
    const targetKey = a.optStr(o?.targetKey, 'targetKey')
    if (watcherKey === '' || targetKey === '') throw a.invalidInput('a session key must not be empty')
    try {
      return this.#native.cursorRows(watcherKey, targetKey).map(cursorRow)
    } catch (e) {
      throw fromNative(e)
    }
  }

  /** The session's state version: the largest sequence recorded for it, 0 when none. */
  stateVersion(sessionKey: string, options?: AgentOptions | null): number {
    a.str(sessionKey, 'sessionKey')
    const agentId = a.optStr(a.opts(options)?.agentId, 'agentId')
    try {
      return this.#native.stateVersion(sessionKey, agentId)
    } catch (e) {
      throw fromNative(e)
    }
  }

  /** The state versions of many sessions, in the order given; sessions at 0 are left out. */
  stateVersions(refs: SessionRef[]): SessionVersion[] {
    if (!Array.isArray(refs)) throw a.invalidInput('refs must be an array')
    const checked = refs.map((r: unknown) => {
      const o = a.opts(r, 'refs')
      if (o === undefined) throw a.invalidInput('refs must hold objects')
      return { sessionKey: a.reqStr(o.sessionKey, 'sessionKey'), agentId: a.optStr(o.agentId, 'agentId') }
    })
    try {
      return packed.versions(this.#native.stateVersions(checked))
    } catch (e) {
      throw fromNative(e)
    }
  }

  /**
   * The exact typed delta of a session after version `after` (a non-negative safe integer),
   * ascending, at most `limit` (clamped to [1, 200]). `historyGap` is true when `after`
   * predates retained history. Moves no cursor.
   */
  changesSince(sessionKey: string, after: number, options?: ChangesSinceOptions | null): ChangesSince {
    a.str(sessionKey, 'sessionKey')
    a.num(after, 'after')
    const o = a.opts(options)
    const agentId = a.optStr(o?.agentId, 'agentId')
    const limit = a.optNum(o?.limit, 'limit')
    let c: packed.PackedChanges
    try {
      c = this.#native.changesSince(sessionKey, after, agentId, limit)
    } catch (e) {
      throw fromNative(e)
    }
    return { stateVersion: c.stateVersion, stateChanges: packed.stateChanges(c) }
  }

  /**
   * The watcher's pending notices in queue order, acknowledged: the turn consumes them. If
   * material events arrived since a notice was queued, exactly one fresh notice reopens with
   * `changesSince` = the old notified position. With nothing pending it runs no SQL.
   */
  drain(watcherKey: string): Notice[] {
    const words = this.#words
    // Nothing queued in the whole store, no watcher unserved since `#served` was filled, and
    // the addon already checked and served this watcher: the addon would answer [] too.
    if (
      words &&
      words[0] === packed.SIGNAL_EMPTY &&
      words[1] === this.#unserved &&
      this.#served.has(watcherKey)
    ) {
      this.#notices?.deliver()
      return []
    }
    a.str(watcherKey, 'watcherKey')
    let rows: packed.PackedRows | null
    try {
      rows = this.#native.drain(watcherKey)
      if (words === undefined) this.#initSignal()
    } catch (e) {
      throw fromNative(e)
    } finally {
      this.#notices?.deliver()
    }
    const w = this.#words
    if (w) {
      if (w[1] !== this.#unserved) {
        this.#served.clear()
        this.#unserved = w[1] as number
      }
      this.#served.add(watcherKey)
    }
    return rows === null ? [] : packed.notices(stored(watcherKey), rows)
  }

  #initSignal(): void {
    const w = this.#native.drainSignal()
    this.#words = w
    if (w) this.#unserved = w[1] as number
  }

  /** The watcher's pending notices in queue order, nothing acknowledged. */
  peek(watcherKey: string): Notice[] {
    a.str(watcherKey, 'watcherKey')
    try {
      return packed.notices(stored(watcherKey), this.#native.peek(watcherKey))
    } catch (e) {
      throw fromNative(e)
    } finally {
      this.#notices?.deliver()
    }
  }

  /**
   * Acknowledges the watcher's pending notices on `targetKeys`, for hosts that route notices
   * through their own queue. Returns how many pending notices were acknowledged (a repeated
   * target counts once). With `scope`, only cursors bound to that scope are acknowledged.
   */
  acknowledge(watcherKey: string, targetKeys: string[], options?: AcknowledgeOptions | null): number {
    a.str(watcherKey, 'watcherKey')
    a.strArray(targetKeys, 'targetKeys')
    const scope = a.optStr(a.opts(options)?.scope, 'scope')
    try {
      return this.#native.acknowledge(watcherKey, targetKeys, scope)
    } catch (e) {
      throw fromNative(e)
    } finally {
      this.#notices?.deliver()
    }
  }

  /**
   * Gateway start: re-freezes every cursor with unacknowledged material history whose
   * watcher still exists and re-queues its notice (one already queued is neither duplicated
   * nor woken again), then prunes.
   */
  sweep(options?: SweepOptions | null): SweepReport {
    const exists = a.optFn<(watcherKey: string) => boolean>(a.opts(options)?.watcherExists, 'watcherExists')
    try {
      return this.#native.sweep(exists)
    } catch (e) {
      throw fromNative(e)
    } finally {
      this.#notices?.deliver()
    }
  }

  /**
   * Prunes now: events older than `retentionMs`, then all but the newest `maxEvents`
   * (watermarks raised first, heads kept), and cursors not updated within `retentionMs`.
   */
  prune(): PruneReport {
    try {
      return this.#native.prune()
    } catch (e) {
      throw fromNative(e)
    }
  }

  /** The watcher session was reset: its cursors and pending notices go; its history stays. */
  resetSession(sessionKey: string): void {
    a.str(sessionKey, 'sessionKey')
    try {
      this.#native.resetSession(sessionKey)
    } catch (e) {
      throw fromNative(e)
    }
  }

  /**
   * Deletes the session's events and head for the agent (default: the key's own, else
   * `main`). For its own agent also every cursor where it is watcher or target, their
   * pending notices, and its upstream link.
   */
  deleteSession(sessionKey: string, options?: AgentOptions | null): void {
    a.str(sessionKey, 'sessionKey')
    const agentId = a.optStr(a.opts(options)?.agentId, 'agentId')
    try {
      this.#native.deleteSession(sessionKey, agentId)
    } catch (e) {
      throw fromNative(e)
    }
  }

  /**
   * True once `close()` has run. It does nothing else, which also makes it the cheapest call
   * into the addon (the benchmarks compare `drain` with nothing pending against it).
   */
  get isClosed(): boolean {
    return this.#native.isClosed
  }

  /**
   * Closes the store, cancels scheduled wakes and stops the poll for other processes'
   * notices. Idempotent; later calls throw `ERR_CLOSED` (`record`: null and `onError`).
   */
  close(): void {
    this.#notices?.stop()
    this.#native.close()
  }

  /**
   * Adopts a session from another tool's catalog (semantics.md#upstream): records `adopted` (log only) and
   * stores its upstream link, replacing any earlier one. A local transcript is scanned from
   * its current end. Best-effort like `record`: null plus one `onError` call on failure.
   */
  adopt(sessionKey: string, link: UpstreamLink): StateEvent | null {
    let p: packed.PackedEvent | null
    try {
      a.str(sessionKey, 'sessionKey')
      const l = a.opts(link, 'link')
      if (l === undefined) throw a.invalidInput('link must be an object')
      p = this.#native.adopt(sessionKey, {
        source: a.reqStr(l.source, 'source'),
        transcriptPath: a.optStr(l.transcriptPath, 'transcriptPath'),
        remoteId: a.optStr(l.remoteId, 'remoteId'),
        agentId: a.optStr(l.agentId, 'agentId'),
        hostId: a.optStr(l.hostId, 'hostId'),
      })
    } catch (e) {
      return this.#failed(e)
    }
    return p === null ? null : packed.eventOf(p)
  }

  /**
   * Tells the monitor about a user message the gateway itself sent into an adopted session,
   * so its echo upstream is not taken for a human. The last 10 per session are kept (across
   * restarts); compared after trimming, collapsing whitespace and Unicode NFC. Does nothing
   * for a session that is not adopted.
   */
  noteOwnUserMessage(sessionKey: string, text: string): void {
    a.str(sessionKey, 'sessionKey')
    a.str(text, 'text')
    try {
      this.#native.noteOwnUserMessage(sessionKey, text)
    } catch (e) {
      throw fromNative(e)
    }
  }

  /**
   * The result of the host's probe of a remote upstream. `found: true` with the newest
   * transcript rows (the last 50 are classified; the first check sets the baseline);
   * `found: false` is a failed check (the third in a row records `upstream_missing` and drops
   * the link); `found: 'unknown'` changes nothing. Returns the event recorded, if any.
   * Best-effort like `record`.
   */
  checkUpstream(sessionKey: string, result: RemoteCheckResult): StateEvent | null {
    let p: packed.PackedEvent | null
    try {
      a.str(sessionKey, 'sessionKey')
      const [found, items] = remoteCheck(result)
      p = this.#native.checkUpstream(sessionKey, found, items)
    } catch (e) {
      return this.#failed(e)
    } finally {
      this.#notices?.deliver()
    }
    return p === null ? null : packed.eventOf(p)
  }

  /**
   * Scans every watched adopted session's local transcript once, now; returns the events
   * recorded. The monitor does the same on its interval.
   */
  scanUpstream(): StateEvent[] {
    try {
      return packed.events(this.#native.scanUpstream())
    } catch (e) {
      throw fromNative(e)
    } finally {
      this.#notices?.deliver()
    }
  }

  /**
   * Starts scanning watched adopted sessions' local transcripts in the background every
   * `intervalMs` (default 5000), restarting the scan if it runs. It never keeps the process
   * alive; failures go to `onError`.
   */
  startUpstreamMonitor(options?: UpstreamMonitorOptions | null): void {
    const intervalMs = a.optNum(a.opts(options)?.intervalMs, 'intervalMs')
    try {
      this.#native.startUpstreamMonitor(intervalMs)
    } catch (e) {
      throw fromNative(e)
    }
  }

  /** Stops the background scan. Idempotent. */
  stopUpstreamMonitor(): void {
    this.#native.stopUpstreamMonitor()
  }
}

/** A native cursor row in the public shape: an absent scope is left out. */
function cursorRow(r: {
  watcherKey: string
  targetKey: string
  lastSeen: number
  notified: number
  material: number
  provenance: string
  scope?: string | null
  updatedAt: number
}): CursorRow {
  const { scope, ...rest } = r
  return scope === undefined || scope === null ? rest : { ...rest, scope }
}

/** A key as the addon stores it: a lone surrogate becomes U+FFFD, as in every string it takes. */
function stored(key: string): string {
  return key.isWellFormed() ? key : key.toWellFormed()
}

/** `checkUpstream`'s result as the addon takes it: `found` as a word, the items as JSON. */
function remoteCheck(result: unknown): [string, string | undefined] {
  const bad = () =>
    a.invalidInput("result must be { found: true, items } | { found: false } | { found: 'unknown' }")
  if (typeof result !== 'object' || result === null) throw bad()
  const { found, items } = result as { found?: unknown; items?: unknown }
  if (found === false) return ['false', undefined]
  if (found === 'unknown') return ['unknown', undefined]
  if (found !== true || !Array.isArray(items)) throw bad()
  const json = items.map((item) => payloadJson(item) ?? 'null')
  return ['true', `[${json.join(',')}]`]
}
