// The store's metrics (docs/metrics.md) through the real OpenTelemetry SDK: a MeterProvider
// with a reader collected on demand, exact counts after a scripted scenario, the histograms'
// counts, the gauges, no key in any attribute; and `stats()` with the same numbers.
import { metrics } from '@opentelemetry/api'
import type { Attributes } from '@opentelemetry/api'
import { AggregationTemporality, MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics'
import type { DataPoint, Histogram, ResourceMetrics } from '@opentelemetry/sdk-metrics'

import * as native from '../index.js'
import { SLOTS } from '../lib/metrics'
import type { SessionStateStats } from '../lib'
import { Clock, DAY, codeOf, fixture, must, waitFor, wakeSink } from './helpers'

const fx = fixture('metrics')

/** A reader collected on demand. */
class Reader extends MetricReader {
  protected onForceFlush(): Promise<void> {
    return Promise.resolve()
  }
  protected onShutdown(): Promise<void> {
    return Promise.resolve()
  }
}

function sdk(temporality = AggregationTemporality.CUMULATIVE): { provider: MeterProvider; reader: Reader } {
  const reader = new Reader({ aggregationTemporalitySelector: () => temporality })
  return { provider: new MeterProvider({ readers: [reader] }), reader }
}

async function collect(reader: Reader): Promise<ResourceMetrics> {
  const { resourceMetrics, errors } = await reader.collect()
  expect(errors).toEqual([])
  return resourceMetrics
}

type Point = DataPoint<unknown>

function pointsOf(rm: ResourceMetrics, name: string): Point[] {
  const found = rm.scopeMetrics.flatMap((s) => s.metrics).filter((m) => m.descriptor.name === name)
  return found.flatMap((m) => m.dataPoints as Point[])
}

const STORE = { 'session_awareness.store': 'sqlite' }

/** The value of the point of `name` whose attributes are exactly the store's plus `attrs`. */
function valueOf(rm: ResourceMetrics, name: string, attrs: Attributes = {}): unknown {
  const want = { ...STORE, ...attrs }
  const p = pointsOf(rm, name).filter((d) => JSON.stringify(sorted(d.attributes)) === JSON.stringify(sorted(want)))
  if (p.length !== 1) throw new Error(`${name} ${JSON.stringify(attrs)}: ${p.length} points`)
  return p[0]?.value
}

function countOf(rm: ResourceMetrics, name: string, attrs: Attributes = {}): number {
  return (valueOf(rm, name, attrs) as Histogram).count
}

function sorted(a: Attributes): [string, unknown][] {
  return Object.entries(a).sort(([x], [y]) => (x < y ? -1 : 1))
}

const MAIN = 'agent:main:main'
const CHILD = 'agent:main:subagent:metrics-child'
const OTHER = 'agent:main:subagent:metrics-other'
const human = { actorType: 'human' as const, summary: 's' }

/**
 * The scenario: a watch, a record of each kind a host records, a notice opened, reopened by a
 * drain and acknowledged, a failing record, a prune, three records off the JS thread (one
 * failing) and a changesSince. Returns the store, the prune's report and the keys used.
 */
async function scenario(file: string, extra: Record<string, unknown>) {
  const clock = new Clock()
  const wake = wakeSink()
  const s = fx.open(file, { clock: clock.fn, wake: wake.wake, wakeCoalesceMs: 0, onError: () => {}, ...extra })
  expect(s.watch(MAIN, CHILD)).toBe(true)
  must(s.record({ sessionKey: CHILD, kind: 'human_direct_message', ...human }))
  // Pending already: no second notice opens.
  must(s.record({ sessionKey: CHILD, kind: 'goal_changed', ...human }))
  for (const kind of ['run_completed', 'run_failed', 'compacted', 'created'] as const) {
    must(s.record({ sessionKey: CHILD, kind, ...human }))
  }
  must(s.record({ sessionKey: OTHER, kind: 'child_spawned', ...human, watchers: [MAIN] }))
  must(s.record({ sessionKey: CHILD, kind: 'created', ...human, dedupeKey: 'once' }))
  // A repeated dedupe key records nothing.
  must(s.record({ sessionKey: CHILD, kind: 'created', ...human, dedupeKey: 'once' }))
  expect(s.record({ sessionKey: CHILD, kind: 'no_such_kind' as 'created', ...human })).toBeNull()
  await waitFor(() => wake.wakes.length === 1, 'the first wake')
  // The drain hands out the notice; the goal change after it reopens one at once.
  expect(s.drain(MAIN)).toHaveLength(1)
  await waitFor(() => wake.wakes.length === 2, 'the reopened notice’s wake')
  expect(s.acknowledge(MAIN, [CHILD])).toBe(1)
  clock.advance(40 * DAY)
  const pruned = s.prune()
  must(await s.recordAsync({ sessionKey: CHILD, kind: 'goal_changed', ...human }))
  must(await s.recordAsync({ sessionKey: CHILD, kind: 'run_completed', ...human }))
  expect(await s.recordAsync({ sessionKey: CHILD, kind: 'no_such_kind' as 'created', ...human })).toBeNull()
  s.changesSince(CHILD, 0)
  return { s, pruned, keys: [MAIN, CHILD, OTHER, file, 'once'] }
}

const KINDS = {
  human_direct_message: 1,
  goal_changed: 2,
  upstream_missing: 0,
  child_spawned: 1,
  run_completed: 2,
  run_failed: 1,
  compacted: 1,
  adopted: 0,
  created: 2,
}

test('the slots of the packed snapshot are the addon’s', () => {
  expect(native.metricsLayout().slots).toEqual([...SLOTS])
})

test('a scripted scenario gives exact counts, histogram counts and gauges, and no key in any attribute', async () => {
  const { provider, reader } = sdk()
  const file = fx.file()
  const { s, pruned, keys } = await scenario(file, { meterProvider: provider, syncIntervalMs: 60_000 })
  expect(pruned).toEqual({ eventsDeleted: 8, cursorsDeleted: 2 })
  const rm = await collect(reader)
  for (const [kind, n] of Object.entries(KINDS)) {
    expect([kind, valueOf(rm, 'session_awareness.events.recorded', { kind })]).toEqual([kind, n])
  }
  expect(valueOf(rm, 'session_awareness.record.failures', { code: 'ERR_INVALID_ARG' })).toBe(2)
  expect(valueOf(rm, 'session_awareness.record.failures', { code: 'ERR_DB' })).toBe(0)
  expect(valueOf(rm, 'session_awareness.notices.opened', { reason: 'new' })).toBe(1)
  expect(valueOf(rm, 'session_awareness.notices.opened', { reason: 'reopen' })).toBe(1)
  expect(valueOf(rm, 'session_awareness.notices.delivered')).toBe(1)
  expect(valueOf(rm, 'session_awareness.notices.acknowledged')).toBe(1)
  expect(valueOf(rm, 'session_awareness.wakes.requested')).toBe(2)
  expect(valueOf(rm, 'session_awareness.prune.deleted', { what: 'events' })).toBe(8)
  expect(valueOf(rm, 'session_awareness.prune.deleted', { what: 'cursors' })).toBe(2)
  expect(valueOf(rm, 'session_awareness.sync.catch_ups')).toBe(0)
  expect(valueOf(rm, 'session_awareness.metrics.samples_dropped')).toBe(0)
  // Ten calls of record reached the store (the failing one too); three of recordAsync.
  expect(countOf(rm, 'session_awareness.record.duration', { api: 'sync' })).toBe(10)
  expect(countOf(rm, 'session_awareness.record.duration', { api: 'async' })).toBe(3)
  // Nine write transactions of record (the dedupe hit too) and one or two group commits.
  const groups = valueOf(rm, 'session_awareness.commit.group_size') as Histogram
  expect(groups.sum).toBe(2)
  expect(countOf(rm, 'session_awareness.commit.duration')).toBe(9 + groups.count)
  expect(countOf(rm, 'session_awareness.changes_since.duration')).toBe(1)
  const unit = (name: string) =>
    rm.scopeMetrics.flatMap((m) => m.metrics).find((m) => m.descriptor.name === name)?.descriptor.unit
  expect(unit('session_awareness.record.duration')).toBe('s')
  expect(unit('session_awareness.sqlite.wal.size')).toBe('By')
  // Gauges: nothing pending after the acknowledge; the watcher is served; the WAL is there.
  expect(valueOf(rm, 'session_awareness.notices.pending')).toBe(0)
  expect(valueOf(rm, 'session_awareness.watchers.served')).toBe(1)
  expect(valueOf(rm, 'session_awareness.sqlite.wal.size') as number).toBeGreaterThan(0)
  expect(valueOf(rm, 'session_awareness.sqlite.wal.frames') as number).toBeGreaterThan(0)
  // The one changesSince read the file and kept the session's events.
  expect(valueOf(rm, 'session_awareness.read_cache.lookups', { result: 'miss' })).toBe(1)
  expect(valueOf(rm, 'session_awareness.read_cache.lookups', { result: 'hit' })).toBe(0)
  expect(valueOf(rm, 'session_awareness.read_cache.size') as number).toBe(s.stats().readCache.bytes)
  expect(s.stats().readCache.bytes).toBeGreaterThan(0)
  expect(unit('session_awareness.read_cache.size')).toBe('By')

  const values = new Set<unknown>()
  for (const m of rm.scopeMetrics.flatMap((x) => x.metrics)) {
    for (const d of m.dataPoints as Point[]) {
      expect(d.attributes['session_awareness.store']).toBe('sqlite')
      for (const v of Object.values(d.attributes)) values.add(v)
    }
  }
  for (const k of keys) expect(values.has(k)).toBe(false)
  for (const v of values) {
    expect(['sqlite', 'sync', 'async', 'new', 'reopen', 'events', 'cursors', 'hit', 'miss', ...Object.keys(KINDS), ...Object.keys(s.stats().recordFailures)]).toContain(v)
  }

  // A second collection sees the same cumulative counts and no histogram value twice.
  s.changesSince(CHILD, 0)
  const again = await collect(reader)
  expect(valueOf(again, 'session_awareness.events.recorded', { kind: 'created' })).toBe(2)
  expect(countOf(again, 'session_awareness.record.duration', { api: 'sync' })).toBe(10)
  expect(countOf(again, 'session_awareness.changes_since.duration')).toBe(2)
  expect(valueOf(again, 'session_awareness.read_cache.lookups', { result: 'hit' })).toBe(1)
  await provider.shutdown()
})

test('stats() holds the same numbers, without any MeterProvider', async () => {
  const { s } = await scenario(fx.file(), {})
  const st: SessionStateStats = s.stats()
  expect(st.eventsRecorded).toEqual(KINDS)
  expect(st.recordFailures.ERR_INVALID_ARG).toBe(2)
  expect(Object.values(st.recordFailures).reduce((x, y) => x + y)).toBe(2)
  expect(st.noticesOpened).toEqual({ new: 1, reopen: 1 })
  expect([st.noticesDelivered, st.noticesAcknowledged, st.wakesRequested]).toEqual([1, 1, 2])
  expect(st.pruneDeleted).toEqual({ events: 8, cursors: 2 })
  expect(st.recordDuration.sync.count).toBe(10)
  expect(st.recordDuration.async.count).toBe(3)
  expect(st.recordDuration.sync.sum).toBeGreaterThan(0)
  expect(st.commitGroupSize.sum).toBe(2)
  expect(st.commitDuration.count).toBe(9 + st.commitGroupSize.count)
  expect(st.changesSinceDuration.count).toBe(1)
  // The default syncIntervalMs serves the watcher across processes.
  expect([st.store, st.samplesDropped, st.noticesPending, st.watchersServed, st.syncCatchUps]).toEqual([
    'sqlite',
    0,
    0,
    1,
    0,
  ])
  expect(st.walBytes).toBeGreaterThan(0)
  expect(st.walFrames).toBeGreaterThan(0)
  expect([st.readCache.hits, st.readCache.misses]).toEqual([0, 1])
  expect(st.readCache.bytes).toBeGreaterThan(0)
  s.close()
  const after = s.stats()
  expect(after.eventsRecorded).toEqual(KINDS)
  expect([after.walBytes, after.walFrames, after.watchersServed]).toEqual([0, 0, 0])
})

test('an in-memory store without cross-process delivery has no WAL and serves no watcher', () => {
  const s = fx.open(':memory:')
  expect(s.watch(MAIN, CHILD)).toBe(true)
  must(s.record({ sessionKey: CHILD, kind: 'goal_changed', ...human }))
  const st = s.stats()
  expect([st.noticesPending, st.watchersServed, st.walBytes, st.walFrames, st.eventsRecorded.goal_changed]).toEqual([
    1, 0, 0, 0, 1,
  ])
})

test('a poll that finds another process’s change counts a catch-up', async () => {
  const file = fx.file()
  const here = fx.open(file, { syncIntervalMs: 20, serveWatchers: [MAIN] })
  expect(here.watch(MAIN, CHILD)).toBe(true)
  const there = fx.open(file, { syncIntervalMs: 0 })
  must(there.record({ sessionKey: CHILD, kind: 'human_direct_message', ...human }))
  await waitFor(() => here.stats().noticesPending === 1, 'the notice from the other store')
  const st = here.stats()
  expect(st.syncCatchUps).toBeGreaterThanOrEqual(1)
  expect(st.noticesOpened.new).toBe(0)
  expect(there.stats().noticesOpened.new).toBe(1)
})

test('the global MeterProvider at open is used; one installed later is not', async () => {
  const early = fx.open(':memory:')
  const { provider, reader } = sdk()
  expect(metrics.setGlobalMeterProvider(provider)).toBe(true)
  try {
    const late = fx.open(':memory:')
    must(late.record({ sessionKey: CHILD, kind: 'compacted', ...human }))
    must(early.record({ sessionKey: CHILD, kind: 'compacted', ...human }))
    const rm = await collect(reader)
    // One store's points only: the early one took the no-op meter.
    expect(valueOf(rm, 'session_awareness.events.recorded', { kind: 'compacted' })).toBe(1)
    expect(early.stats().eventsRecorded.compacted).toBe(1)
  } finally {
    metrics.disable()
    await provider.shutdown()
  }
})

test('a closed store reports its last values once, then its callback is gone', async () => {
  // Delta temporality: a callback still observing would report points of 0.
  const { provider, reader } = sdk(AggregationTemporality.DELTA)
  const s = fx.open(':memory:', { meterProvider: provider })
  must(s.record({ sessionKey: CHILD, kind: 'run_failed', ...human }))
  s.close()
  const rm = await collect(reader)
  expect(valueOf(rm, 'session_awareness.events.recorded', { kind: 'run_failed' })).toBe(1)
  expect(countOf(rm, 'session_awareness.record.duration', { api: 'sync' })).toBe(1)
  await new Promise((r) => setImmediate(r))
  const later = await collect(reader)
  expect(pointsOf(later, 'session_awareness.events.recorded')).toEqual([])
  await provider.shutdown()
})

test('closeAsync hands the last values over too', async () => {
  const { provider, reader } = sdk()
  const s = fx.open(':memory:', { meterProvider: provider })
  must(await s.recordAsync({ sessionKey: CHILD, kind: 'run_failed', ...human }))
  await s.closeAsync()
  const rm = await collect(reader)
  expect(countOf(rm, 'session_awareness.record.duration', { api: 'async' })).toBe(1)
  expect(s.stats().recordDuration.async.count).toBe(1)
  await provider.shutdown()
})

test('meterProvider must be an object with a getMeter function', () => {
  expect(codeOf(() => fx.open(':memory:', { meterProvider: 5 as never }))).toBe('ERR_INVALID_ARG')
  expect(codeOf(() => fx.open(':memory:', { meterProvider: {} as never }))).toBe('ERR_INVALID_ARG')
  const s = fx.open(':memory:', { meterProvider: null })
  expect(s.stats().store).toBe('sqlite')
})
