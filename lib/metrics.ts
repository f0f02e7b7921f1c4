/**
 * The store's metrics (docs/metrics.md): `state.stats()` and the OpenTelemetry instruments.
 *
 * The counting happens in the addon, as atomic counters per store; nothing is added per call
 * on the JavaScript side. When a store opens, {@link StoreMetrics} creates the instruments on
 * a meter of the `meterProvider` option, or else of the global provider at that moment.
 * Counters and gauges are observable instruments fed from one packed snapshot in one batch
 * callback. OpenTelemetry has no observable histogram, so with a real provider the addon
 * keeps each histogram value in a bounded ring (4,096 values per histogram) that the same callback
 * drains into the histograms; a value that finds its ring full is dropped from the
 * histogram and counted (`session_awareness.metrics.samples_dropped`), while
 * {@link SessionStateStats}'s counts and sums stay exact. Under the global no-op provider no
 * ring is kept and no callback ever runs.
 * @packageDocumentation
 */
import { createNoopMeter, metrics, ValueType } from '@opentelemetry/api'
import type {
  Attributes,
  BatchObservableResult,
  Histogram,
  Meter,
  MeterProvider,
  Observable,
  ObservableCounter,
  ObservableGauge,
} from '@opentelemetry/api'
import type { NativeSessionState } from '../index.js'
import { invalid } from './errors'
import type { ErrorCode } from './errors'
import { EventKind } from './types'

/** The store kinds a `session_awareness.store` attribute names. */
export type StoreKind = 'sqlite' | 'postgres'

/** A histogram's totals: how many values, and their sum (seconds, or records). */
export interface HistogramStats {
  /** Values recorded. */
  count: number
  /** Their sum: seconds for a duration, records for `commitGroupSize`. */
  sum: number
}

/**
 * The counters and gauges of one store, as `state.stats()` returns them (docs/metrics.md):
 * the numbers behind the OpenTelemetry instruments, for hosts without OpenTelemetry. Counters
 * count from the store's open; they stay readable after `close()`.
 */
export interface SessionStateStats {
  /** The kind of store (`session_awareness.store`). */
  store: StoreKind
  /** Events recorded (new rows; a repeated `dedupeKey` is not one), by kind. */
  eventsRecorded: Record<EventKind, number>
  /** Records (`record`, `recordAsync`) that reached the store and failed, by code. */
  recordFailures: Record<RecordFailureCode, number>
  /** Notices opened: `new` by a material event, `reopen` by a drain or acknowledge that found changes after the notice. */
  noticesOpened: { new: number; reopen: number }
  /** Notices handed out by `drain`. */
  noticesDelivered: number
  /** Notices acknowledged by `acknowledge`. */
  noticesAcknowledged: number
  /** Calls of the `wake` option (after coalescing). */
  wakesRequested: number
  /** Rows deleted by prunes (manual and automatic). */
  pruneDeleted: { events: number; cursors: number }
  /** Polls for other processes that found the file changed by another connection. */
  syncCatchUps: number
  /** `record` (sync: the store's part of the call) and `recordAsync` (async: queued to result), in seconds. */
  recordDuration: { sync: HistogramStats; async: HistogramStats }
  /** Write transactions of records and group commits, `BEGIN` to `COMMIT`, in seconds. */
  commitDuration: HistogramStats
  /** `changesSince` in the store, in seconds. */
  changesSinceDuration: HistogramStats
  /** Records per group commit of the Promise API's writer. */
  commitGroupSize: HistogramStats
  /** Histogram values that found their ring full and were left out of the OpenTelemetry histograms (0 without a MeterProvider). */
  samplesDropped: number
  /** Notices queued now. */
  noticesPending: number
  /** Watchers served across processes now (0 when `syncIntervalMs` is 0 or the store is in memory). */
  watchersServed: number
  /** Bytes of the SQLite `-wal` file now (0 in memory or when there is none): the WAL's high-water mark. */
  walBytes: number
  /** Frames in the WAL after the last commit (0 in memory): how far it ran since it last started over. */
  walFrames: number
  /** Followers open now (`state.follow`, semantics.md#follow). */
  followersOpen: number
  /**
   * The read cache (`readCacheBytes`, docs/semantics.md#reading-memory): `changesSince` calls
   * answered from memory (`hits`) and read from the file (`misses`), and the bytes it holds
   * now. All 0 on PostgreSQL, which keeps no read cache.
   */
  readCache: { hits: number; misses: number; bytes: number }
}

/**
 * The `meterProvider` option, checked: absent, or an object with a `getMeter` function.
 * @internal
 */
export function optMeterProvider(v: unknown): MeterProvider | undefined {
  if (v === undefined || v === null) return undefined
  // A provider is an instance of the host's SDK, not an options object: its members are its own.
  if (typeof v !== 'object' || typeof (v as { getMeter?: unknown }).getMeter !== 'function') {
    throw invalid('meterProvider must be an object with a getMeter function')
  }
  return v as MeterProvider
}

/** The codes `recordFailures` counts, in the addon's order. */
export const RECORD_FAILURE_CODES = [
  'ERR_INVALID_ARG',
  'ERR_CLOSED',
  'ERR_DB',
  'ERR_UPSTREAM_PARSE',
  'ERR_NOT_SQLITE',
  'ERR_FILE_SHARED',
  'ERR_FOREIGN_SCHEMA',
  'ERR_IMPORT_DIVERGED',
  'ERR_OUTCOME_UNKNOWN',
] as const satisfies readonly ErrorCode[]

/** A code `recordFailures` counts. */
export type RecordFailureCode = (typeof RECORD_FAILURE_CODES)[number]

const KINDS: readonly EventKind[] = Object.values(EventKind)
const HISTOGRAMS = ['record.sync', 'record.async', 'commit', 'changes_since', 'commit.group_size'] as const
const COUNTERS = [
  'notices.opened:new',
  'notices.opened:reopen',
  'notices.delivered',
  'notices.acknowledged',
  'wakes.requested',
  'prune.deleted:events',
  'prune.deleted:cursors',
  'sync.catch_ups',
  'read_cache.lookups:hit',
  'read_cache.lookups:miss',
] as const
const GAUGES = [
  'notices.pending',
  'watchers.served',
  'sqlite.wal.size',
  'sqlite.wal.frames',
  'followers.open',
  'read_cache.size',
] as const

/**
 * The names of the fixed slots of the addon's packed snapshot, in order; a test checks them
 * against the addon's `metricsLayout()`.
 * @internal
 */
export const SLOTS: readonly string[] = [
  ...KINDS.map((k) => `events.recorded:${k}`),
  ...RECORD_FAILURE_CODES.map((c) => `record.failures:${c}`),
  ...COUNTERS,
  ...HISTOGRAMS.flatMap((h) => [`${h}:count`, `${h}:sum`, `${h}:dropped`]),
  ...GAUGES,
]

const AT_FAILURES = KINDS.length
const AT_COUNTERS = AT_FAILURES + RECORD_FAILURE_CODES.length
const AT_HISTOGRAMS = AT_COUNTERS + COUNTERS.length
const AT_GAUGES = AT_HISTOGRAMS + 3 * HISTOGRAMS.length

/** Bucket boundaries of the duration histograms, in seconds: 10 µs to 10 s. */
export const DURATION_BUCKETS: readonly number[] = [
  0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
  2.5, 5, 10,
]
/** Bucket boundaries of `session_awareness.commit.group_size`, in records. */
export const GROUP_SIZE_BUCKETS: readonly number[] = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]

function histogramStats(n: Float64Array, h: number): HistogramStats {
  const at = AT_HISTOGRAMS + 3 * h
  return { count: n[at] ?? 0, sum: n[at + 1] ?? 0 }
}

/** The typed object of a packed snapshot. */
function statsOf(store: StoreKind, n: Float64Array): SessionStateStats {
  const at = (i: number): number => n[i] ?? 0
  const eventsRecorded = {} as Record<EventKind, number>
  KINDS.forEach((k, i) => (eventsRecorded[k] = at(i)))
  const recordFailures = {} as Record<RecordFailureCode, number>
  RECORD_FAILURE_CODES.forEach((c, i) => (recordFailures[c] = at(AT_FAILURES + i)))
  let samplesDropped = 0
  for (let h = 0; h < HISTOGRAMS.length; h++) samplesDropped += at(AT_HISTOGRAMS + 3 * h + 2)
  return {
    store,
    eventsRecorded,
    recordFailures,
    noticesOpened: { new: at(AT_COUNTERS), reopen: at(AT_COUNTERS + 1) },
    noticesDelivered: at(AT_COUNTERS + 2),
    noticesAcknowledged: at(AT_COUNTERS + 3),
    wakesRequested: at(AT_COUNTERS + 4),
    pruneDeleted: { events: at(AT_COUNTERS + 5), cursors: at(AT_COUNTERS + 6) },
    syncCatchUps: at(AT_COUNTERS + 7),
    recordDuration: { sync: histogramStats(n, 0), async: histogramStats(n, 1) },
    commitDuration: histogramStats(n, 2),
    changesSinceDuration: histogramStats(n, 3),
    commitGroupSize: histogramStats(n, 4),
    samplesDropped,
    noticesPending: at(AT_GAUGES),
    watchersServed: at(AT_GAUGES + 1),
    walBytes: at(AT_GAUGES + 2),
    walFrames: at(AT_GAUGES + 3),
    followersOpen: at(AT_GAUGES + 4),
    readCache: { hits: at(AT_COUNTERS + 8), misses: at(AT_COUNTERS + 9), bytes: at(AT_GAUGES + 5) },
  }
}

/**
 * True for an instrument of the API's no-op meter (the global provider before a host installs
 * one). The API has no official test; a no-op histogram is an instance of the API's own class.
 */
function isNoop(probe: Histogram): boolean {
  return Object.getPrototypeOf(probe) === Object.getPrototypeOf(createNoopMeter().createHistogram('probe'))
}

// Said once per process: a registered provider the store's copy of the API cannot see.
let hiddenProviderTold = false

/**
 * The store's meter is the API's no-op while the process has a global provider registered:
 * one registered through another copy of `@opentelemetry/api` that the store's copy does not
 * accept (the API keeps its globals under one symbol per major version and refuses a
 * registration of an older minor). Warns once per process (docs/metrics.md#provider).
 */
function tellHiddenProvider(): void {
  const globals = (globalThis as Record<symbol, { metrics?: unknown; version?: unknown } | undefined>)[
    Symbol.for('opentelemetry.js.api.1')
  ]
  if (hiddenProviderTold || globals?.metrics === undefined) return
  hiddenProviderTold = true
  process.emitWarning(
    `session-awareness: a MeterProvider is registered through @opentelemetry/api ${String(globals.version)}, ` +
      "which this package's copy of the API does not accept, so its stores report no metrics. " +
      'Install one copy of @opentelemetry/api (the package takes it as a peer dependency), ' +
      'or pass the provider as the meterProvider option',
    { code: 'SESSION_AWARENESS_NOOP_METER' },
  )
}

/** The instruments of one store and the batch callback that feeds them. */
interface Instruments {
  meter: Meter
  observables: Observable[]
  callback: (result: BatchObservableResult) => void
}

/**
 * The metrics of one store: `stats()` from the addon's snapshot, and the OpenTelemetry
 * instruments, created once when the store opens.
 * @internal
 */
export class StoreMetrics {
  readonly #store: StoreKind
  // Held weakly by the callback: a meter must not keep a dropped store alive.
  readonly #native: WeakRef<NativeSessionState>
  #instruments: Instruments | undefined = undefined
  // The last snapshot after close, reported once more at the next collection.
  #final: Float64Array | undefined = undefined
  // Records the histogram values of a snapshot taken with samples.
  #drain: ((n: Float64Array) => void) | undefined = undefined

  /**
   * Creates the instruments of the store over `native` on `provider`, or else on the global
   * provider now; under the API's no-op provider, none.
   */
  constructor(native: NativeSessionState, provider: MeterProvider | undefined, store: StoreKind = 'sqlite') {
    this.#store = store
    this.#native = new WeakRef(native)
    this.#instruments = this.#create(provider ?? metrics.getMeterProvider())
    if (this.#instruments === undefined && provider === undefined) tellHiddenProvider()
  }

  /** The counters and gauges now. */
  stats(): SessionStateStats {
    const n = this.#final ?? this.#native.deref()?.metricsSnapshot(false) ?? new Float64Array(SLOTS.length)
    return statsOf(this.#store, n)
  }

  /**
   * The store closed: the values kept since the last collection go into the histograms now,
   * its counters are reported once more at the next collection, then the callback goes.
   */
  closed(): void {
    const native = this.#native.deref()
    if (this.#final !== undefined || native === undefined) return
    this.#final = native.metricsSnapshot(false)
    this.#drain?.(native.metricsSnapshot(true))
  }

  #create(provider: MeterProvider): Instruments | undefined {
    const meter = provider.getMeter('session-awareness')
    const store = { 'session_awareness.store': this.#store }
    const attrs = (extra: Attributes): Attributes => Object.freeze({ ...store, ...extra })
    const duration = (name: string, description: string): Histogram =>
      meter.createHistogram(name, {
        description,
        unit: 's',
        advice: { explicitBucketBoundaries: [...DURATION_BUCKETS] },
      })
    const recordDuration = duration('session_awareness.record.duration', 'Duration of a record, by API.')
    if (isNoop(recordDuration)) return undefined
    const histograms: [Histogram, Attributes][] = [
      [recordDuration, attrs({ api: 'sync' })],
      [recordDuration, attrs({ api: 'async' })],
      [duration('session_awareness.commit.duration', 'Duration of a write transaction of records.'), attrs({})],
      [duration('session_awareness.changes_since.duration', 'Duration of a changesSince read.'), attrs({})],
      [
        meter.createHistogram('session_awareness.commit.group_size', {
          description: 'Records per group commit of the Promise API.',
          unit: '{record}',
          valueType: ValueType.INT,
          advice: { explicitBucketBoundaries: [...GROUP_SIZE_BUCKETS] },
        }),
        attrs({}),
      ],
    ]
    const counter = (name: string, unit: string, description: string): ObservableCounter =>
      meter.createObservableCounter(name, { description, unit, valueType: ValueType.INT })
    const gauge = (name: string, unit: string, description: string): ObservableGauge =>
      meter.createObservableGauge(name, { description, unit, valueType: ValueType.INT })
    const recorded = counter('session_awareness.events.recorded', '{event}', 'Events recorded, by kind.')
    const failures = counter('session_awareness.record.failures', '{record}', 'Records that failed, by code.')
    const opened = counter('session_awareness.notices.opened', '{notice}', 'Notices opened, by reason.')
    const delivered = counter('session_awareness.notices.delivered', '{notice}', 'Notices handed out by drain.')
    const acked = counter('session_awareness.notices.acknowledged', '{notice}', 'Notices acknowledged.')
    const wakes = counter('session_awareness.wakes.requested', '{wake}', 'Calls of the wake hook.')
    const pruned = counter('session_awareness.prune.deleted', '{row}', 'Rows deleted by prunes, by what.')
    const catchUps = counter(
      'session_awareness.sync.catch_ups',
      '{poll}',
      'Polls that found changes made by other processes.',
    )
    const lookups = counter(
      'session_awareness.read_cache.lookups',
      '{call}',
      'changesSince calls, by whether the read cache answered them.',
    )
    const dropped = counter(
      'session_awareness.metrics.samples_dropped',
      '{value}',
      'Histogram values left out because their ring was full.',
    )
    const pending = gauge('session_awareness.notices.pending', '{notice}', 'Notices queued.')
    const served = gauge('session_awareness.watchers.served', '{watcher}', 'Watchers served across processes.')
    const wal = gauge('session_awareness.sqlite.wal.size', 'By', 'Size of the SQLite -wal file.')
    const frames = gauge(
      'session_awareness.sqlite.wal.frames',
      '{frame}',
      'Frames in the WAL after the last commit, since it last started over.',
    )
    const followers = gauge('session_awareness.followers.open', '{follower}', 'Followers open (state.follow).')
    const cacheSize = gauge('session_awareness.read_cache.size', 'By', 'Bytes the read cache holds.')
    const observables: Observable[] = [
      recorded,
      failures,
      opened,
      delivered,
      acked,
      wakes,
      pruned,
      catchUps,
      lookups,
      dropped,
      pending,
      served,
      wal,
      frames,
      followers,
      cacheSize,
    ]
    const kindAttrs = KINDS.map((kind) => attrs({ kind }))
    const codeAttrs = RECORD_FAILURE_CODES.map((code) => attrs({ code }))
    const plain = attrs({})
    const reasons = [attrs({ reason: 'new' }), attrs({ reason: 'reopen' })]
    const whats = [attrs({ what: 'events' }), attrs({ what: 'cursors' })]
    const results = [attrs({ result: 'hit' }), attrs({ result: 'miss' })]
    const drain = (n: Float64Array): void => {
      let at = SLOTS.length
      for (const [h, a] of histograms) {
        const count = n[at++] ?? 0
        for (let i = 0; i < count; i++) h.record(n[at++] ?? 0, a)
      }
    }
    this.#drain = drain
    const callback = (r: BatchObservableResult): void => {
      let n: Float64Array
      if (this.#final === undefined) {
        const native = this.#native.deref()
        if (native === undefined) return this.#remove()
        n = native.metricsSnapshot(true)
        drain(n)
      } else {
        n = this.#final
        // Reported once after close; the callback goes after this collection.
        setImmediate(() => this.#remove())
      }
      const at = (i: number): number => n[i] ?? 0
      kindAttrs.forEach((a, i) => r.observe(recorded, at(i), a))
      codeAttrs.forEach((a, i) => r.observe(failures, at(AT_FAILURES + i), a))
      r.observe(opened, at(AT_COUNTERS), reasons[0])
      r.observe(opened, at(AT_COUNTERS + 1), reasons[1])
      r.observe(delivered, at(AT_COUNTERS + 2), plain)
      r.observe(acked, at(AT_COUNTERS + 3), plain)
      r.observe(wakes, at(AT_COUNTERS + 4), plain)
      r.observe(pruned, at(AT_COUNTERS + 5), whats[0])
      r.observe(pruned, at(AT_COUNTERS + 6), whats[1])
      r.observe(catchUps, at(AT_COUNTERS + 7), plain)
      r.observe(lookups, at(AT_COUNTERS + 8), results[0])
      r.observe(lookups, at(AT_COUNTERS + 9), results[1])
      let lost = 0
      for (let h = 0; h < HISTOGRAMS.length; h++) lost += at(AT_HISTOGRAMS + 3 * h + 2)
      r.observe(dropped, lost, plain)
      r.observe(pending, at(AT_GAUGES), plain)
      r.observe(served, at(AT_GAUGES + 1), plain)
      r.observe(wal, at(AT_GAUGES + 2), plain)
      r.observe(frames, at(AT_GAUGES + 3), plain)
      r.observe(followers, at(AT_GAUGES + 4), plain)
      r.observe(cacheSize, at(AT_GAUGES + 5), plain)
    }
    this.#native.deref()?.keepMetricSamples()
    meter.addBatchObservableCallback(callback, observables)
    return { meter, observables, callback }
  }

  #remove(): void {
    const i = this.#instruments
    this.#instruments = undefined
    i?.meter.removeBatchObservableCallback(i.callback, i.observables)
  }
}
