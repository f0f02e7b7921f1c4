/**
 * `SessionState`: the public class over the native store. It checks arguments, keeps the
 * best-effort rules of `record` and `adopt`, answers an empty `drain` from the queue's shared
 * signal words, and builds results from their packed form (`packed.ts`).
 * @packageDocumentation
 */
import { NativeSessionState, openNativeSessionState } from '../index.js'
import * as a from './args'
import { Lane } from './async'
import type { Report } from './async'
import {
  acknowledgeArgs,
  adoptArgs,
  agentArgs,
  changesSinceArgs,
  checkUpstreamArgs,
  cursorRowOf,
  cursorRowsArgs,
  noteOwnUserMessageArgs,
  recordArgs,
  stored,
  sweepPredicate,
  unwatchArgs,
  watchArgs,
} from './call-args'
import { asyncOnly, failedIn, fromCode } from './errors'
import { StoreMetrics } from './metrics'
import type { SessionStateStats } from './metrics'
import type { Gate } from './gate'
import { DrainSignal } from './drain-signal'
import { NoticeListener } from './notice-listener'
import { type FollowOptions, type Follower, follow } from './follow'
import * as packed from './packed'
import * as versions from './versions'
import type {
  AcknowledgeOptions,
  AgentOptions,
  ChangesSince,
  ChangesSinceOptions,
  CursorRow,
  CursorRowFilter,
  Notice,
  PruneReport,
  RecordInput,
  RemoteCheckResult,
  SessionRef,
  SessionVersion,
  StateEvent,
  SweepOptions,
  SweepReport,
  UpstreamLink,
  UpstreamMonitorOptions,
  WatchOptions,
} from './types'
import { type Prepared, type SessionStateOptions, prepare } from './store-options'

export type { SessionStateOptions } from './store-options'

/** What a PostgreSQL store's gateway calls instead of a synchronous method without a twin of its name. */
const INSTEAD: Record<string, string | null> = {
  stateVersion: 'stateVersionsAsync',
}

/**
 * Each store's native object, for the package's own modules that reach calls the class does
 * not expose (the OpenClaw adapter's link rows). Not exported from the package.
 * @internal
 */
export const natives = new WeakMap<SessionState, NativeSessionState>()

/**
 * Session state awareness over one SQLite file, or a PostgreSQL database shared by gateways
 * on several hosts (docs/postgres.md): a durable signal log, watch cursors with one
 * coalesced stale-state notice per (watcher, target), and `changesSince` reconciliation.
 */
export class SessionState {
  readonly #native: NativeSessionState
  readonly #report: Report
  readonly #strict: boolean
  // The empty-drain answer, from the queue's signal words.
  readonly #signal: DrainSignal
  // The `onNotice` listener's delivery, when there is one.
  readonly #notices: NoticeListener | undefined
  readonly #lane: Lane
  readonly #metrics: StoreMetrics
  readonly #gate: Gate
  // A PostgreSQL store: a synchronous call that needs the database is refused (#before).
  readonly #remote: boolean
  #closing: Promise<void> | undefined = undefined
  // A store `open` made, handed to the constructor it calls.
  static #opened: { native: NativeSessionState; prepared: Prepared } | undefined = undefined

  /**
   * Opens (creating if needed) the store at `path`: a SQLite file of its own (for a gateway,
   * `<stateDir>/state/session-state.sqlite`). Other tables in it and its `user_version` are
   * left alone. A new file is created with mode 0600 and a missing directory with mode 0700.
   * Opening never prunes. Throws `ERR_INVALID_ARG` for a bad or unknown option, `ERR_DB`
   * when the file cannot be opened as a database, `ERR_NOT_SQLITE` for a file that is not
   * SQLite (left as it was; either message names the file), `ERR_INVALID_ARG` for a SQLite
   * `file:` URI (nothing is created), and `ERR_FILE_SHARED` when another handle of this
   * process (`node:sqlite`, better-sqlite3, a plain descriptor) has the file open. A handle
   * that appears later refuses every write with `ERR_FILE_SHARED` while it is open (`record`:
   * null and `onError`) and reads are answered; once it is closed the store reopens its
   * connections by itself, taking its locks anew, with one `onError` saying so
   * (semantics.md#storage-shared-file). A `postgres://` or `postgresql://` URL throws
   * `ERR_ASYNC_ONLY`: such a store is opened with {@link SessionState.open}.
   */
  constructor(path: string, options?: SessionStateOptions | null) {
    const opened = SessionState.#opened
    SessionState.#opened = undefined
    let p: Prepared
    try {
      p = opened?.prepared ?? prepare(path, options)
    } catch (e) {
      throw failedIn(e, 'new SessionState')
    }
    if (opened === undefined && p.remote) {
      throw asyncOnly('new SessionState', 'await SessionState.open(url, options)')
    }

    this.#remote = p.remote
    this.#strict = p.strict
    this.#report = p.report
    if (opened !== undefined) {
      this.#native = opened.native
    } else {
      try {
        this.#native = new NativeSessionState(path, p.native)
      } catch (e) {
        throw failedIn(e, 'new SessionState')
      }
    }
    p.gate.native = new WeakRef(this.#native)
    this.#gate = p.gate
    let afterBatch: (() => void) | undefined
    this.#signal = new DrainSignal(this.#native)
    if (p.onNotice !== undefined) {
      const every = p.native.syncIntervalMs || 100
      const notices = new NoticeListener(this.#native, this.#signal.words(), p.onNotice, p.report, every)
      this.#notices = notices
      // The listener hears of the notices a Promise API batch queued before its promises
      // settle. The writer's callback holds the listener weakly: it must not keep the store
      // alive.
      const weak = new WeakRef(notices)
      afterBatch = () => weak.deref()?.deliver()
      // Notices queued by background work (the PostgreSQL catch-up, the poll for other
      // processes, the upstream monitor) are handed over as soon as they enter, not at the
      // next tick; the addon's signal holds the listener weakly too.
      this.#native.signalNotices(afterBatch)
    }
    this.#lane = new Lane(this.#native, this.#report, this.#strict, afterBatch)
    this.#metrics = new StoreMetrics(this.#native, p.meterProvider, p.remote ? 'postgres' : 'sqlite')
    natives.set(this, this.#native)
  }

  /**
   * Opens the store at `path` as the constructor does, with the file work (creating,
   * checking, migrating the schema; the guard's scan) off the JS thread. Rejects with the
   * constructor's codes: `ERR_INVALID_ARG`, `ERR_DB`, `ERR_NOT_SQLITE`, `ERR_FILE_SHARED`,
   * `ERR_FOREIGN_SCHEMA`.
   *
   * With a `postgres://` or `postgresql://` URL (libpq's form, `sslmode` honoured) it opens
   * a store on that PostgreSQL database, creating its tables in the schema of the `schema`
   * option at the first open (docs/postgres.md). Such a store serves the Promise API; a
   * synchronous method that needs the database throws `ERR_ASYNC_ONLY` and does nothing,
   * whatever is queued (`drain` included), while `peek` answers from memory. Rejects with
   * `ERR_INVALID_ARG` for a bad URL or option and `ERR_DB` when the server cannot be reached
   * or refuses (the message never contains the password).
   */
  static async open(path: string, options?: SessionStateOptions | null): Promise<SessionState> {
    let prepared: Prepared
    let r: NativeSessionState | { code: string; message: string }
    try {
      prepared = prepare(path, options)
      r = await openNativeSessionState(path, prepared.native)
    } catch (e) {
      throw failedIn(e, 'SessionState.open')
    }
    if (!(r instanceof NativeSessionState)) throw fromCode(r.code, r.message, 'SessionState.open')
    SessionState.#opened = { native: r, prepared }
    return new SessionState(path, options)
  }

  /**
   * Before every synchronous call that needs the database (the one place that decides it):
   * on a PostgreSQL store it throws `ERR_ASYNC_ONLY` and nothing is done, since the call
   * would wait for the server on the JS thread; otherwise the Promise API's calls made
   * before it run first.
   */
  #before(method: string): void {
    if (this.#remote) throw asyncOnly(method, INSTEAD[method] === undefined ? `${method}Async` : INSTEAD[method])
    if (this.#lane.pending > 0) this.#native.settle()
  }

  /**
   * A synchronous call into the addon after the Promise API's earlier calls: its failure is
   * thrown as a {@link SessionStateError}.
   */
  #call<T>(method: string, f: (native: NativeSessionState) => T): T {
    this.#before(method)
    try {
      return f(this.#native)
    } catch (e) {
      throw failedIn(e, method)
    }
  }

  /** {@link SessionState.#call} for a call that may queue notices: the listener hears of them. */
  #notify<T>(method: string, f: (native: NativeSessionState) => T): T {
    this.#before(method)
    try {
      return f(this.#native)
    } catch (e) {
      throw failedIn(e, method)
    } finally {
      this.#notices?.deliver()
    }
  }

  /** A best-effort failure of `method`: thrown with `strict`, else reported; null either way. */
  #failed(e: unknown, method: string): null {
    const err = failedIn(e, method)
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
    this.#before('record')
    try {
      const args = recordArgs(input)
      p = this.#native.record(...args)
    } catch (e) {
      this.#notices?.deliver()
      return this.#failed(e, 'record')
    }
    this.#notices?.deliver()
    return p === null ? null : packed.eventOf(p)
  }

  /**
   * Registers `watcherKey` as a watcher of `targetKey`, seeded at the target's current
   * version (earlier history never notifies). An existing cursor is kept (an
   * `ambient-group` one is promoted to `explicit`, never the reverse) and its expiry
   * refreshed. Returns false for a bare watcher or target, or watcher == target.
   */
  watch(watcherKey: string, targetKey: string, options?: WatchOptions | null): boolean {
    return this.#notify('watch', (n) => n.watch(...watchArgs(watcherKey, targetKey, options)))
  }

  /** Removes the cursor and its pending notice. True if a cursor was removed. */
  unwatch(watcherKey: string, targetKey: string): boolean {
    return this.#call('unwatch', (n) => n.unwatch(...unwatchArgs(watcherKey, targetKey)))
  }

  /**
   * The cursor rows of a watcher and/or a target, every column as stored (all rows when both
   * are absent), ordered by watcher, then target. Moves nothing; for hosts that answer
   * questions about watches (who watches a session, which targets a watcher follows).
   */
  cursorRows(filter?: CursorRowFilter | null): CursorRow[] {
    return this.#call('cursorRows', (n) => n.cursorRows(...cursorRowsArgs(filter)).map(cursorRowOf))
  }

  /** The session's state version: the largest sequence recorded for it, 0 when none. */
  stateVersion(sessionKey: string, options?: AgentOptions | null): number {
    return this.#call('stateVersion', (n) => n.stateVersion(...agentArgs(sessionKey, options)))
  }

  /** The state versions of many sessions, in the order given; sessions at 0 are left out. */
  stateVersions(refs: SessionRef[]): SessionVersion[] {
    const keys: string[] = []
    return this.#call('stateVersions', (n) => versions.versionsOf(keys, n.stateVersions(versions.packRefs(refs, keys))))
  }

  /**
   * The exact typed delta of a session after version `after` (a non-negative safe integer),
   * ascending, at most `limit` (clamped to [1, 200]). `historyGap` is true when `after`
   * predates retained history. Moves no cursor.
   */
  changesSince(sessionKey: string, after: number, options?: ChangesSinceOptions | null): ChangesSince {
    const c = this.#call('changesSince', (n) => n.changesSince(...changesSinceArgs(sessionKey, after, options)))
    return { stateVersion: c.stateVersion, stateChanges: packed.stateChanges(c) }
  }

  /**
   * The watcher's pending notices in queue order, acknowledged: the turn consumes them. If
   * material events arrived since a notice was queued, exactly one fresh notice reopens with
   * `changesSince` = the old notified position; a turn that then reads the target with
   * `changesSince` withdraws it with {@link SessionState.acknowledge}'s `through`. A drain that
   * leaves the watcher nothing queued withdraws its scheduled wake. With nothing pending it
   * runs no SQL (except the first call for a watcher this process does not serve yet, which
   * reads its pending notices from the file). On PostgreSQL it throws `ERR_ASYNC_ONLY`
   * whatever is queued (a drain may need the database): use {@link SessionState.drainAsync}.
   */
  drain(watcherKey: string): Notice[] {
    if (!this.#remote && this.#signal.nothingFor(watcherKey, this.#lane.pending)) {
      this.#notices?.deliver()
      return []
    }
    const rows = this.#notify('drain', (n) => n.drain(a.str(watcherKey, 'watcherKey')))
    this.#signal.servedNow(watcherKey)
    return rows === null ? [] : packed.notices(stored(watcherKey), rows)
  }

  /**
   * The watcher's pending notices in queue order, nothing acknowledged. On PostgreSQL it
   * answers from this process's queue as it is now, without waiting for Promise API calls
   * still in flight.
   */
  peek(watcherKey: string): Notice[] {
    if (this.#remote) return this.#memoryPeek(watcherKey)
    return this.#notify('peek', (n) => packed.notices(stored(watcherKey), n.peek(a.str(watcherKey, 'watcherKey'))))
  }

  /** `peek` of a PostgreSQL store: the in-memory queue, no database and no wait. */
  #memoryPeek(watcherKey: string): Notice[] {
    try {
      return packed.notices(stored(watcherKey), this.#native.peek(a.str(watcherKey, 'watcherKey')))
    } catch (e) {
      throw failedIn(e, 'peek')
    } finally {
      this.#notices?.deliver()
    }
  }

  /**
   * Acknowledges the watcher's pending notices on `targetKeys`, for hosts that route notices
   * through their own queue, or after reconciling: with `through` (the sequence of the last
   * event `changesSince` returned), a notice whose events are all read is withdrawn, with its
   * wake. Returns how many pending notices were acknowledged (a repeated target counts once).
   */
  acknowledge(watcherKey: string, targetKeys: string[], options?: AcknowledgeOptions | null): number {
    return this.#notify('acknowledge', (n) => n.acknowledge(...acknowledgeArgs(watcherKey, targetKeys, options)))
  }

  /**
   * Gateway start: re-freezes every cursor with unacknowledged material history whose
   * watcher still exists and re-queues its notice (one already queued is neither duplicated
   * nor woken again), then prunes.
   */
  sweep(options?: SweepOptions | null): SweepReport {
    let refused: (() => unknown) | undefined
    try {
      this.#before('sweep')
      const predicate = sweepPredicate(options)
      refused = predicate.refused
      return this.#native.sweep(predicate.exists)
    } catch (e) {
      throw failedIn(refused?.() ?? e, 'sweep')
    } finally {
      this.#notices?.deliver()
    }
  }

  /**
   * Prunes now: events older than `retentionMs`, then all but the newest `maxEvents`
   * (watermarks raised first, heads kept), and cursors not updated within `retentionMs`.
   */
  prune(): PruneReport {
    return this.#call('prune', (n) => n.prune())
  }

  /** The watcher session was reset: its cursors and pending notices go; its history stays. */
  resetSession(sessionKey: string): void {
    this.#call('resetSession', (n) => n.resetSession(a.str(sessionKey, 'sessionKey')))
  }

  /**
   * Deletes the session's events and head for the agent (default: the key's own, else
   * `main`). For its own agent also every cursor where it is watcher or target, their
   * pending notices, and its upstream link.
   */
  deleteSession(sessionKey: string, options?: AgentOptions | null): void {
    this.#call('deleteSession', (n) => n.deleteSession(...agentArgs(sessionKey, options)))
  }

  /**
   * True once `close()` has run or `closeAsync()` was called. It does nothing else, which
   * also makes it the cheapest call into the addon (the benchmarks compare `drain` with
   * nothing pending against it).
   */
  get isClosed(): boolean {
    return this.#closing !== undefined || this.#native.isClosed
  }

  /**
   * Closes the store, cancels scheduled wakes and stops the poll for other processes'
   * notices, once the Promise API's calls made before have run (their promises settle
   * normally). Idempotent; later calls throw `ERR_CLOSED` (`record`: null and `onError`;
   * the `*Async` methods: rejected, `recordAsync` null and `onError`).
   */
  close(): void {
    this.#gate.closing = true
    this.#notices?.stop()
    this.#native.close()
    this.#notices?.closed()
    this.#lane.closed()
    this.#metrics.closed()
  }

  /** The store's counters and gauges now (docs/metrics.md); after `close()`, the last. Runs no SQL. */
  stats(): SessionStateStats {
    return this.#metrics.stats()
  }

  /**
   * Adopts a session from another tool's catalog (semantics.md#upstream): records `adopted` (log only) and
   * stores its upstream link, replacing any earlier one. A local transcript is scanned from
   * its current end. Best-effort like `record`: null plus one `onError` call on failure.
   */
  adopt(sessionKey: string, link: UpstreamLink): StateEvent | null {
    let p: packed.PackedEvent | null
    this.#before('adopt')
    try {
      const args = adoptArgs(sessionKey, link)
      p = this.#native.adopt(...args)
    } catch (e) {
      return this.#failed(e, 'adopt')
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
    this.#call('noteOwnUserMessage', (n) => n.noteOwnUserMessage(...noteOwnUserMessageArgs(sessionKey, text)))
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
    this.#before('checkUpstream')
    try {
      const args = checkUpstreamArgs(sessionKey, result)
      p = this.#native.checkUpstream(...args)
    } catch (e) {
      return this.#failed(e, 'checkUpstream')
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
    return this.#notify('scanUpstream', (n) => packed.events(n.scanUpstream()) as StateEvent[])
  }

  /**
   * Starts scanning watched adopted sessions' local transcripts in the background every
   * `intervalMs` (default 5000), restarting the scan if it runs. It never keeps the process
   * alive; failures go to `onError`.
   */
  startUpstreamMonitor(options?: UpstreamMonitorOptions | null): void {
    try {
      const intervalMs = a.optNum(a.opts(options, 'options', 'upstreamMonitor')?.intervalMs, 'intervalMs')
      this.#native.startUpstreamMonitor(intervalMs)
    } catch (e) {
      throw failedIn(e, 'startUpstreamMonitor')
    }
  }

  /** Stops the background scan. Idempotent. */
  stopUpstreamMonitor(): void {
    this.#native.stopUpstreamMonitor()
  }

  // The Promise API (semantics.md#promise-api): each call is queued on the store's writer
  // thread and runs there in call order; the promise settles after the commit. Argument
  // errors reject (the best-effort calls: null plus one `onError`, unless `strict`).

  /**
   * {@link SessionState.record} off the JS thread. Resolves after the commit, with the same
   * durability as a returned `record`; records queued while a commit runs are committed
   * together in the next transaction, each exactly as alone. Best-effort: never rejects
   * (unless `strict`); null plus exactly one `onError` call on failure.
   */
  recordAsync(input: RecordInput): Promise<StateEvent | null> {
    return this.#lane.record(input)
  }

  /** {@link SessionState.watch} off the JS thread. */
  watchAsync(watcherKey: string, targetKey: string, options?: WatchOptions | null): Promise<boolean> {
    return this.#lane.watch(watcherKey, targetKey, options)
  }

  /** {@link SessionState.unwatch} off the JS thread. */
  unwatchAsync(watcherKey: string, targetKey: string): Promise<boolean> {
    return this.#lane.unwatch(watcherKey, targetKey)
  }

  /**
   * {@link SessionState.drain} with the acknowledgement off the JS thread: resolves with the
   * notices once their cursors are acknowledged. With nothing pending (no notice queued, no
   * Promise API call in flight) it resolves with [] at once, without the writer.
   */
  drainAsync(watcherKey: string): Promise<Notice[]> {
    if (this.#signal.nothingFor(watcherKey, this.#lane.pending)) return Promise.resolve([])
    return this.#lane.drain(watcherKey).then((notices) => {
      this.#signal.servedNow(watcherKey)
      return notices
    })
  }

  /** {@link SessionState.acknowledge} off the JS thread. */
  acknowledgeAsync(
    watcherKey: string,
    targetKeys: string[],
    options?: AcknowledgeOptions | null,
  ): Promise<number> {
    return this.#lane.acknowledge(watcherKey, targetKeys, options)
  }

  /**
   * {@link SessionState.sweep} off the JS thread. With `watcherExists`, the watchers with
   * unacknowledged history are read first, asked on the JS thread, and the sweep is queued
   * with the answer: it runs after the calls made meanwhile.
   */
  sweepAsync(options?: SweepOptions | null): Promise<SweepReport> {
    return this.#lane.sweep(options)
  }

  /** {@link SessionState.prune} off the JS thread. */
  pruneAsync(): Promise<PruneReport> {
    return this.#lane.prune()
  }

  /** {@link SessionState.resetSession} off the JS thread. */
  resetSessionAsync(sessionKey: string): Promise<void> {
    return this.#lane.resetSession(sessionKey)
  }

  /** {@link SessionState.deleteSession} off the JS thread. */
  deleteSessionAsync(sessionKey: string, options?: AgentOptions | null): Promise<void> {
    return this.#lane.deleteSession(sessionKey, options)
  }

  /** {@link SessionState.adopt} off the JS thread. Best-effort like `recordAsync`. */
  adoptAsync(sessionKey: string, link: UpstreamLink): Promise<StateEvent | null> {
    return this.#lane.adopt(sessionKey, link)
  }

  /** {@link SessionState.checkUpstream} off the JS thread. Best-effort like `recordAsync`. */
  checkUpstreamAsync(sessionKey: string, result: RemoteCheckResult): Promise<StateEvent | null> {
    return this.#lane.checkUpstream(sessionKey, result)
  }

  /** {@link SessionState.noteOwnUserMessage} off the JS thread. */
  noteOwnUserMessageAsync(sessionKey: string, text: string): Promise<void> {
    return this.#lane.noteOwnUserMessage(sessionKey, text)
  }

  /**
   * {@link SessionState.scanUpstream} off the JS thread: one scan of every watched adopted
   * session's local transcript, in call order; resolves with the events recorded. On a
   * PostgreSQL store it scans the links this host adopted (its `hostName`).
   */
  scanUpstreamAsync(): Promise<StateEvent[]> {
    return this.#lane.scanUpstream()
  }

  /** Follows the session live: what is stored after `after`, then each new batch (semantics.md#follow). */
  follow(sessionKey: string, options?: FollowOptions | null): Follower {
    try {
      return follow(this, this.#native, this.#gate, sessionKey, options)
    } catch (e) {
      throw failedIn(e, 'follow')
    }
  }

  /** {@link SessionState.changesSince} off the JS thread. */
  changesSinceAsync(sessionKey: string, after: number, options?: ChangesSinceOptions | null): Promise<ChangesSince> {
    return this.#lane.changesSince(sessionKey, after, options)
  }

  /** {@link SessionState.cursorRows} off the JS thread. */
  cursorRowsAsync(filter?: CursorRowFilter | null): Promise<CursorRow[]> {
    return this.#lane.cursorRows(filter)
  }

  /** {@link SessionState.stateVersions} off the JS thread. */
  stateVersionsAsync(refs: SessionRef[]): Promise<SessionVersion[]> {
    return this.#lane.stateVersions(refs)
  }

  /**
   * {@link SessionState.close} off the JS thread: queued behind every call made before, which
   * settle normally; calls made after it are refused with `ERR_CLOSED`. Idempotent: every
   * call returns the same promise.
   */
  closeAsync(): Promise<void> {
    this.#gate.closing = true
    this.#notices?.stop()
    // The listener hears of nothing once the close settles (semantics.md#notices-listener), and
    // the metrics report the store's last values once more.
    const done = (): void => {
      this.#notices?.closed()
      this.#metrics.closed()
    }
    this.#closing ??= this.#lane.close().then(done, (e: unknown) => {
      done()
      throw e
    })
    return this.#closing
  }
}
