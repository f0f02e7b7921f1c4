/**
 * `SessionState`: the public class over the native store. It checks arguments, keeps the
 * best-effort rules of `record` and `adopt`, answers an empty `drain` from the queue's shared
 * signal words, and builds results from their packed form (`packed.ts`).
 * @packageDocumentation
 */
import { NativeSessionState, openNativeSessionState } from '../index.js'
import type { MeterProvider } from '@opentelemetry/api'
import * as a from './args'
import { Lane } from './async'
import type { Report } from './async'
import { recordArgs, remoteCheck, stored, sweepPredicate, upstreamLink } from './call-args'
import { SessionStateError, fromCode, fromNative } from './errors'
import { StoreMetrics, optMeterProvider } from './metrics'
import type { SessionStateStats } from './metrics'
import { type Gate, gate as newGate, isOpen } from './gate'
import { NoticeListener } from './notice-listener'
import * as packed from './packed'
import * as versions from './versions'
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
   * database file: a poll of `PRAGMA data_version`, nearly free when nothing changed. The
   * poll also renews this process's leases on the watchers it serves, which last
   * max(3 × syncIntervalMs, 1 s) (semantics.md#processes).
   * Default 100; an integer in [0, 60000]; 0 turns cross-process delivery off.
   */
  syncIntervalMs?: number | null
  /**
   * Watchers this process serves from the start: notices opened for them by other processes
   * reach this process's `drain`/`peek` and `wake`, and a record in another process leaves
   * them to the processes that serve them (semantics.md#processes). A watcher is also served
   * once this process drains, peeks or acknowledges for it, watches for it, or names it in a
   * record's `watchers`; its first drain or peek reads what is pending for it from the file.
   * Bare keys are ignored; a blank entry (empty or whitespace-only) is `ERR_INVALID_ARG`
   * naming its index.
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
   * for other processes, the upstream monitor) arrive on the next call or a timer tick. A throwing listener is reported to `onError` as
   * `ERR_NOTICE_CALLBACK`, never thrown into the caller.
   */
  onNotice?: ((notice: QueuedNotice) => void) | null
  /**
   * The OpenTelemetry `MeterProvider` the store's instruments are created on when it opens
   * (docs/metrics.md). Default: the global provider of `@opentelemetry/api` at that moment;
   * a provider installed later is not seen by a store already open.
   */
  meterProvider?: MeterProvider | null
}

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

/** The constructor's options, checked: what the native store takes, the reporter, `strict`. */
interface Prepared {
  native: ConstructorParameters<typeof NativeSessionState>[1]
  report: Report
  strict: boolean
  onNotice: ((notice: QueuedNotice) => void) | undefined
  meterProvider: MeterProvider | undefined
  gate: Gate
}

function prepare(path: string, options: SessionStateOptions | null | undefined): Prepared {
  a.str(path, 'path')
  const o = a.opts(options, 'options', 'store') ?? {}
  const onError = a.optFn<Report>(o.onError, 'onError')
  const report = reporter(onError)
  const gate = newGate()
  const wake = a.optFn<(req: WakeRequest) => void>(o.wake, 'wake')
  const native = {
    retentionMs: a.optNum(o.retentionMs, 'retentionMs'),
    maxEvents: a.optNum(o.maxEvents, 'maxEvents'),
    busyTimeoutMs: a.optNum(o.busyTimeoutMs, 'busyTimeoutMs'),
    wakeCoalesceMs: a.optNum(o.wakeCoalesceMs, 'wakeCoalesceMs'),
    wake:
      wake === undefined
        ? undefined
        : (req: WakeRequest) => {
            if (isOpen(gate)) wake(req)
          },
    clock: a.optFn<() => number>(o.clock, 'clock'),
    syncIntervalMs: a.optNum(o.syncIntervalMs, 'syncIntervalMs'),
    serveWatchers: a.optStrArray(o.serveWatchers, 'serveWatchers'),
    notifyKinds: a.optStrArray(o.notifyKinds, 'notifyKinds'),
    seedResetsProvenance: a.optBool(o.seedResetsProvenance, 'seedResetsProvenance'),
    noticeOutbox: o.onNotice !== undefined && o.onNotice !== null,
    onError: (err: { code: string; message: string }) => {
      if (isOpen(gate)) report(fromCode(err.code, err.message))
    },
  }
  const onNotice = a.optFn<(notice: QueuedNotice) => void>(o.onNotice, 'onNotice')
  const meterProvider = optMeterProvider(o.meterProvider)
  return { native, report, strict: a.optBool(o.strict, 'strict') ?? false, onNotice, meterProvider, gate }
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
  readonly #lane: Lane
  readonly #metrics: StoreMetrics
  readonly #gate: Gate
  #closing: Promise<void> | undefined = undefined
  // A store `open` made, handed to the constructor it calls.
  static #opened: { native: NativeSessionState; prepared: Prepared } | undefined = undefined

  /**
   * Opens (creating if needed) the store at `path`: a SQLite file of its own (for a gateway,
   * `<stateDir>/state/session-state.sqlite`). Other tables in it and its `user_version` are
   * left alone. A new file is created with mode 0600 and a missing directory with mode 0700.
   * Opening never prunes. Throws `ERR_INVALID_ARG` for a bad or unknown option, `ERR_DB`
   * when the file cannot be opened as a database, `ERR_NOT_SQLITE` for a file that is not
   * SQLite (left as it was; either message names the file), and `ERR_FILE_SHARED` when another SQLite library of this
   * process (`node:sqlite`, better-sqlite3) has the file open; a handle that appears later
   * makes every call that touches the file fail with `ERR_FILE_SHARED` (`record`: null and
   * `onError`) until the store is reopened.
   */
  constructor(path: string, options?: SessionStateOptions | null) {
    const opened = SessionState.#opened
    SessionState.#opened = undefined
    const p = opened?.prepared ?? prepare(path, options)
    this.#strict = p.strict
    this.#report = p.report
    if (opened !== undefined) {
      this.#native = opened.native
    } else {
      try {
        this.#native = new NativeSessionState(path, p.native)
      } catch (e) {
        throw fromNative(e)
      }
    }
    p.gate.native = new WeakRef(this.#native)
    this.#gate = p.gate
    let afterBatch: (() => void) | undefined
    if (p.onNotice !== undefined) {
      this.#initSignal()
      const every = p.native.syncIntervalMs || 100
      const notices = new NoticeListener(this.#native, this.#words ?? null, p.onNotice, p.report, every)
      this.#notices = notices
      // The listener hears of the notices a Promise API batch queued before its promises
      // settle. The writer's callback holds the listener weakly: it must not keep the store
      // alive.
      const weak = new WeakRef(notices)
      afterBatch = () => weak.deref()?.deliver()
    }
    this.#lane = new Lane(this.#native, this.#report, this.#strict, afterBatch)
    this.#metrics = new StoreMetrics(this.#native, p.meterProvider)
    natives.set(this, this.#native)
  }

  /**
   * Opens the store at `path` as the constructor does, with the file work (creating,
   * checking, migrating the schema; the guard's scan) off the JS thread. Rejects with the
   * constructor's codes: `ERR_INVALID_ARG`, `ERR_DB`, `ERR_NOT_SQLITE`, `ERR_FILE_SHARED`,
   * `ERR_FOREIGN_SCHEMA`.
   */
  static async open(path: string, options?: SessionStateOptions | null): Promise<SessionState> {
    const prepared = prepare(path, options)
    let r: NativeSessionState | { code: string; message: string }
    try {
      r = await openNativeSessionState(path, prepared.native)
    } catch (e) {
      throw fromNative(e)
    }
    if (!(r instanceof NativeSessionState)) throw fromCode(r.code, r.message)
    SessionState.#opened = { native: r, prepared }
    return new SessionState(path, options)
  }

  /** Before a synchronous call: the Promise API's calls made before it run first. */
  #settle(): void {
    if (this.#lane.pending > 0) this.#native.settle()
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
      const args = recordArgs(input)
      this.#settle()
      p = this.#native.record(...args)
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
   * refreshed. Returns false for a bare watcher or target, or watcher == target.
   */
  watch(watcherKey: string, targetKey: string, options?: WatchOptions | null): boolean {
    a.str(watcherKey, 'watcherKey')
    a.str(targetKey, 'targetKey')
    const o = a.opts(options, 'options', 'watch')
    const provenance = a.optStr(o?.provenance, 'provenance')
    const scope = a.optStr(o?.scope, 'scope')
    const refresh = a.optBool(o?.refresh, 'refresh')
    try {
      this.#settle()
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
      this.#settle()
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
    const o = a.opts(filter, 'filter', 'cursorRows')
    const watcherKey = a.optStr(o?.watcherKey, 'watcherKey')
    const targetKey = a.optStr(o?.targetKey, 'targetKey')
    try {
      return this.#native.cursorRows(watcherKey, targetKey).map(cursorRow)
    } catch (e) {
      throw fromNative(e)
    }
  }

  /** The session's state version: the largest sequence recorded for it, 0 when none. */
  stateVersion(sessionKey: string, options?: AgentOptions | null): number {
    a.str(sessionKey, 'sessionKey')
    const agentId = a.optStr(a.opts(options, 'options', 'agent')?.agentId, 'agentId')
    try {
      this.#settle()
      return this.#native.stateVersion(sessionKey, agentId)
    } catch (e) {
      throw fromNative(e)
    }
  }

  /** The state versions of many sessions, in the order given; sessions at 0 are left out. */
  stateVersions(refs: SessionRef[]): SessionVersion[] {
    const keys: string[] = []
    const refsText = versions.packRefs(refs, keys)
    try {
      this.#settle()
      return versions.versionsOf(keys, this.#native.stateVersions(refsText))
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
    const o = a.opts(options, 'options', 'changesSince')
    const agentId = a.optStr(o?.agentId, 'agentId')
    const limit = a.optNum(o?.limit, 'limit')
    let c: packed.PackedChanges
    try {
      this.#settle()
      c = this.#native.changesSince(sessionKey, after, agentId, limit)
    } catch (e) {
      throw fromNative(e)
    }
    return { stateVersion: c.stateVersion, stateChanges: packed.stateChanges(c) }
  }

  /**
   * The watcher's pending notices in queue order, acknowledged: the turn consumes them. If
   * material events arrived since a notice was queued, exactly one fresh notice reopens with
   * `changesSince` = the old notified position; a turn that then reads the target with
   * `changesSince` withdraws it with {@link SessionState.acknowledge}'s `through`. A drain that
   * leaves the watcher nothing queued withdraws its scheduled wake. With nothing pending it
   * runs no SQL (except the first call for a watcher this process does not serve yet, which
   * reads its pending notices from the file).
   */
  drain(watcherKey: string): Notice[] {
    if (this.#nothingFor(watcherKey)) {
      this.#notices?.deliver()
      return []
    }
    a.str(watcherKey, 'watcherKey')
    let rows: packed.PackedRows | null
    try {
      this.#settle()
      rows = this.#native.drain(watcherKey)
    } catch (e) {
      throw fromNative(e)
    } finally {
      this.#notices?.deliver()
    }
    this.#servedNow(watcherKey)
    return rows === null ? [] : packed.notices(stored(watcherKey), rows)
  }

  /**
   * Nothing queued in the whole store, no Promise API call pending, no watcher unserved since
   * `#served` was filled, and the addon already checked and served this watcher: the addon
   * would answer [] too.
   */
  #nothingFor(watcherKey: string): boolean {
    const words = this.#words
    return (
      !!words &&
      words[0] === packed.SIGNAL_EMPTY &&
      this.#lane.pending === 0 &&
      words[1] === this.#unserved &&
      this.#served.has(watcherKey)
    )
  }

  /** After the addon drained for `watcherKey`: it is checked and served. */
  #servedNow(watcherKey: string): void {
    if (this.#words === undefined) this.#initSignal()
    const w = this.#words
    if (w) {
      if (w[1] !== this.#unserved) {
        this.#served.clear()
        this.#unserved = w[1] as number
      }
      this.#served.add(watcherKey)
    }
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
      this.#settle()
      return packed.notices(stored(watcherKey), this.#native.peek(watcherKey))
    } catch (e) {
      throw fromNative(e)
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
    a.str(watcherKey, 'watcherKey')
    a.strArray(targetKeys, 'targetKeys')
    const o = a.opts(options, 'options', 'acknowledge')
    const scope = a.optStr(o?.scope, 'scope')
    const through = a.optNum(o?.through, 'through')
    try {
      this.#settle()
      return this.#native.acknowledge(watcherKey, targetKeys, scope, through)
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
    const { exists, refused } = sweepPredicate(options)
    try {
      this.#settle()
      return this.#native.sweep(exists)
    } catch (e) {
      throw refused() ?? fromNative(e)
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
      this.#settle()
      return this.#native.prune()
    } catch (e) {
      throw fromNative(e)
    }
  }

  /** The watcher session was reset: its cursors and pending notices go; its history stays. */
  resetSession(sessionKey: string): void {
    a.str(sessionKey, 'sessionKey')
    try {
      this.#settle()
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
    const agentId = a.optStr(a.opts(options, 'options', 'agent')?.agentId, 'agentId')
    try {
      this.#settle()
      this.#native.deleteSession(sessionKey, agentId)
    } catch (e) {
      throw fromNative(e)
    }
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
    try {
      a.str(sessionKey, 'sessionKey')
      const l = upstreamLink(link)
      this.#settle()
      p = this.#native.adopt(sessionKey, l)
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
      this.#settle()
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
      this.#settle()
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
      this.#settle()
      return packed.events(this.#native.scanUpstream()) as StateEvent[]
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
    const intervalMs = a.optNum(a.opts(options, 'options', 'upstreamMonitor')?.intervalMs, 'intervalMs')
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
    if (this.#nothingFor(watcherKey)) return Promise.resolve([])
    return this.#lane.drain(watcherKey).then((notices) => {
      this.#servedNow(watcherKey)
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

  /** {@link SessionState.changesSince} off the JS thread. */
  changesSinceAsync(sessionKey: string, after: number, options?: ChangesSinceOptions | null): Promise<ChangesSince> {
    return this.#lane.changesSince(sessionKey, after, options)
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
