/**
 * The options of the `SessionState` constructor and `SessionState.open`: their public shape,
 * and their check into what the native store takes, the reporter of best-effort failures and
 * the store's close gate.
 * @packageDocumentation
 */
import type { NativeSessionState } from '../index.js'
import type { MeterProvider } from '@opentelemetry/api'
import * as a from './args'
import type { Report } from './async'
import { type SessionStateError, fromCode, invalid } from './errors'
import { optMeterProvider } from './metrics'
import { type Gate, gate as newGate, isOpen, wakeDue } from './gate'
import type { EventKind, QueuedNotice, WakeRequest } from './types'

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
   * The most memory, in bytes, a SQLite store keeps for its reads: the recent events of the
   * sessions it writes and reads, which answer `changesSince` without reading the file, and
   * the versions behind `stateVersions` (docs/semantics.md#reading-memory). Answers never
   * differ from the file's. Default 4 MiB (4194304); an integer in [0, 2^30]; 0 turns it off.
   * A PostgreSQL store keeps no read cache and ignores it.
   */
  readCacheBytes?: number | null
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
   * before that call returns, in queue order; notices queued by background work (another
   * host's notice caught up on PostgreSQL, the poll for other processes, the upstream monitor)
   * arrive at once, on the JS thread's next turn of the event loop. A throwing listener is reported to `onError` as
   * `ERR_NOTICE_CALLBACK`, never thrown into the caller.
   */
  onNotice?: ((notice: QueuedNotice) => void) | null
  /**
   * The OpenTelemetry `MeterProvider` the store's instruments are created on when it opens
   * (docs/metrics.md). Default: the global provider of `@opentelemetry/api` at that moment;
   * a provider installed later is not seen by a store already open.
   */
  meterProvider?: MeterProvider | null
  /**
   * A PostgreSQL store only (a `postgres://` URL; on a file it is `ERR_INVALID_ARG`): the
   * schema that holds the store's tables, created at the first open if missing
   * (docs/postgres.md#schema). Default `session_awareness`; a plain lowercase identifier
   * (`[a-z_][a-z0-9_]*`, at most 63 bytes, not starting with `pg_`).
   */
  schema?: string | null
  /**
   * A PostgreSQL store only: how long, in ms, opening or reconnecting waits for the server
   * (TCP, TLS and authentication). Default 10,000.
   */
  connectTimeoutMs?: number | null
  /**
   * A PostgreSQL store only: the server cancels a statement of the store that runs longer
   * (`statement_timeout`, set on each of its connections); the call fails with `ERR_DB`.
   * Default 30,000.
   */
  statementTimeoutMs?: number | null
  /**
   * A PostgreSQL store only: how long, in ms, calls wait for the server once the store has
   * lost its connection (a restart, a failover, a cut link), in call order, before they
   * settle as failed (docs/postgres.md#faults). Default 30,000; 0 does not wait.
   */
  reconnectWindowMs?: number | null
  /**
   * A PostgreSQL store only: how many Promise API calls may wait for the server at once while
   * the connection is down; past it a new call settles at once as a failed one (`ERR_DB`).
   * Default 10,000; an integer in [1, 1,000,000].
   */
  maxWaitingCalls?: number | null
  /**
   * A PostgreSQL store only: this host's name among the gateways that share the schema. The
   * sessions it adopts with a local transcript are scanned only by stores of the same name
   * (the transcript is a file on this machine; docs/postgres.md#differences). Default the
   * machine's hostname (as `os.hostname()` gives it); a non-empty string of at most 255
   * bytes without U+0000.
   */
  hostName?: string | null
}

/** The options only a PostgreSQL store takes (refused on a file). */
const POSTGRES_ONLY = [
  'schema',
  'connectTimeoutMs',
  'statementTimeoutMs',
  'reconnectWindowMs',
  'maxWaitingCalls',
  'hostName',
] as const

/**
 * True when `path` is the URL of a PostgreSQL store (`postgres://` or `postgresql://`, the
 * scheme in any case, as the core reads it); anything else is a file path, as before.
 */
export function isPostgresUrl(path: string): boolean {
  return /^postgres(?:ql)?:\/\//i.test(path)
}

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
export interface Prepared {
  /** What the native store takes. */
  native: ConstructorParameters<typeof NativeSessionState>[1]
  /** Where best-effort failures go: `onError`, else one stderr line. */
  report: Report
  /** `record` and `adopt` throw instead of reporting. */
  strict: boolean
  /** The `onNotice` listener, if any. */
  onNotice: ((notice: QueuedNotice) => void) | undefined
  /** The provider the store's instruments are created on. */
  meterProvider: MeterProvider | undefined
  /** The store's close gate: nothing reaches the host once it closes. */
  gate: Gate
  /** The store is on PostgreSQL: only the Promise API reaches its database. */
  remote: boolean
}

/**
 * Checks the options of the store at `path`: throws `ERR_INVALID_ARG` for a bad or unknown
 * one, and for an option of a PostgreSQL store given with a file path.
 */
export function prepare(path: string, options: SessionStateOptions | null | undefined): Prepared {
  a.str(path, 'path')
  const o = a.opts(options, 'options', 'store') ?? {}
  const remote = isPostgresUrl(path)
  if (!remote) {
    for (const name of POSTGRES_ONLY) {
      if (o[name] !== undefined && o[name] !== null) {
        throw invalid(`${name} is an option of a PostgreSQL store (a postgres:// URL), not of a file`)
      }
    }
  }
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
            if (wakeDue(gate, req.sessionKey)) wake(req)
          },
    clock: a.optFn<() => number>(o.clock, 'clock'),
    syncIntervalMs: a.optNum(o.syncIntervalMs, 'syncIntervalMs'),
    readCacheBytes: a.optNum(o.readCacheBytes, 'readCacheBytes'),
    serveWatchers: a.optStrArray(o.serveWatchers, 'serveWatchers'),
    notifyKinds: a.optStrArray(o.notifyKinds, 'notifyKinds'),
    seedResetsProvenance: a.optBool(o.seedResetsProvenance, 'seedResetsProvenance'),
    noticeOutbox: o.onNotice !== undefined && o.onNotice !== null,
    schema: a.optStr(o.schema, 'schema'),
    connectTimeoutMs: a.optNum(o.connectTimeoutMs, 'connectTimeoutMs'),
    statementTimeoutMs: a.optNum(o.statementTimeoutMs, 'statementTimeoutMs'),
    reconnectWindowMs: a.optNum(o.reconnectWindowMs, 'reconnectWindowMs'),
    maxWaitingCalls: a.optNum(o.maxWaitingCalls, 'maxWaitingCalls'),
    hostName: a.optStr(o.hostName, 'hostName'),
    onError: (err: { code: string; message: string; task?: string | null }) => {
      if (isOpen(gate)) report(fromCode(err.code, err.message, err.task ? `task:${err.task}` : undefined))
    },
  }
  const onNotice = a.optFn<(notice: QueuedNotice) => void>(o.onNotice, 'onNotice')
  const meterProvider = optMeterProvider(o.meterProvider)
  const strict = a.optBool(o.strict, 'strict') ?? false
  return { native, report, strict, onNotice, meterProvider, gate, remote }
}

