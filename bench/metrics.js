'use strict';
// What the metrics cost (docs/metrics.md; `npm run bench:metrics`, and part of `npm run bench`):
// `record` and `recordAsync` on three stores in one process, in interleaved rounds so all three
// see the same machine load (each round starts with the next store); medians of the rounds
// are reported.
//
// - baseline: the addon before the metrics, when BENCH_METRICS_BASELINE names its package
//   directory (a build of an earlier commit: `dist/`, `index.js` and the binary); left out
//   without it;
// - no MeterProvider: this build, the global no-op provider (the counters run, nothing else);
// - SDK MeterProvider: this build with `@opentelemetry/sdk-metrics`' MeterProvider and a
//   reader. The record rounds do not collect (a host collects every 10 to 60 s); after each
//   round the reader collects, and that collection's time divided by the round's records is
//   reported on its own row: the JS-thread time each record costs at collection, when its
//   histogram values are replayed into the SDK's histograms. Two last rows time a collection
//   with nothing new (the fixed part of each collection) and the SDK's own `Histogram.record`
//   of one value (the floor under the rest).
//
// Output: a Markdown table, and with `--json <file>` the samples and rows as JSON.

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { input } = require('./async');

const ROUNDS = Number(process.env.BENCH_METRICS_ROUNDS) || 25;
const RECORDS = Number(process.env.BENCH_METRICS_RECORDS) || 500;
const IN_FLIGHT = 8;
const MAIN = 'agent:main:main';
const BASELINE = process.env.BENCH_METRICS_BASELINE;

const hr = () => process.hrtime.bigint();
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const ns = (x) => (x < 1e3 ? `${x.toFixed(0)} ns` : x < 1e6 ? `${(x / 1e3).toFixed(2)} µs` : `${(x / 1e6).toFixed(2)} ms`);

function sdk() {
  const { MeterProvider, MetricReader } = require('@opentelemetry/sdk-metrics');
  class Reader extends MetricReader {
    onForceFlush() {
      return Promise.resolve();
    }
    onShutdown() {
      return Promise.resolve();
    }
  }
  const reader = new Reader();
  return { provider: new MeterProvider({ readers: [reader] }), reader };
}

async function main() {
  const jsonAt = process.argv.indexOf('--json');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'session-awareness-bench-metrics-'));
  const { SessionState } = require('..');
  const { provider, reader } = sdk();
  const variants = [];
  if (BASELINE) {
    const Base = require(path.resolve(BASELINE, 'dist')).SessionState;
    variants.push({ name: 'baseline', open: (f) => new Base(f) });
  }
  variants.push({ name: 'no MeterProvider', open: (f) => new SessionState(f) });
  variants.push({ name: 'SDK MeterProvider', open: (f) => new SessionState(f, { meterProvider: provider }), reader });
  let n = 0;
  for (const v of variants) {
    v.store = v.open(path.join(dir, `${v.name.replace(/\W+/g, '-')}.sqlite`));
    v.session = `agent:main:subagent:bench-${n++}`;
    v.store.watch(MAIN, v.session);
    v.samples = { record: [], recordAsync: [], collectRecord: [], collectAsync: [] };
  }
  let seq = 0;
  const collect = async (v, into) => {
    if (!v.reader) return;
    const t = hr();
    await v.reader.collect();
    into.push(Number(hr() - t) / RECORDS);
  };
  try {
    for (let r = 0; r <= ROUNDS; r++) {
      // Each round starts with the next store, so no store always runs first.
      const order = variants.map((_, i) => variants[(i + r) % variants.length]);
      for (const v of order) {
        v.store.drain(MAIN);
        let t = hr();
        for (let i = 0; i < RECORDS; i++) v.store.record(input(v.session, seq++));
        const sync = Number(hr() - t) / RECORDS;
        await collect(v, r > 0 ? v.samples.collectRecord : []);
        t = hr();
        let next = 0;
        const lane = async () => {
          while (next < RECORDS) {
            next += 1;
            await v.store.recordAsync(input(v.session, seq++));
          }
        };
        await Promise.all(Array.from({ length: IN_FLIGHT }, lane));
        const async = Number(hr() - t) / RECORDS;
        await collect(v, r > 0 ? v.samples.collectAsync : []);
        // Round 0 warms up.
        if (r > 0) {
          v.samples.record.push(sync);
          v.samples.recordAsync.push(async);
        }
      }
    }
    // A collection with nothing recorded since the one before: the fixed part of the
    // collection rows above (observing every counter and gauge, exporting nothing new).
    const sdkStore = variants.find((v) => v.reader);
    sdkStore.idleCollect = [];
    for (let r = 0; r <= ROUNDS; r++) {
      const t = hr();
      await sdkStore.reader.collect();
      if (r > 0) sdkStore.idleCollect.push(Number(hr() - t));
    }
  } finally {
    for (const v of variants) v.store.close();
    await provider.shutdown();
    fs.rmSync(dir, { recursive: true, force: true });
  }
  const rows = [];
  for (const [api, key, collectKey] of [
    ['record', 'record', 'collectRecord'],
    [`recordAsync (${IN_FLIGHT} in flight)`, 'recordAsync', 'collectAsync'],
  ]) {
    // Each store against the one before it: no MeterProvider against the baseline, the SDK
    // against no MeterProvider; the paired per-round difference, its median.
    variants.forEach((v, i) => {
      const m = median(v.samples[key]);
      const prev = variants[i - 1];
      let against = '—';
      if (prev) {
        const d = median(v.samples[key].map((x, r) => x - prev.samples[key][r]));
        against = `${d >= 0 ? '+' : '−'}${ns(Math.abs(d))} against ${prev.name} (${((d / median(prev.samples[key])) * 100).toFixed(1)}%)`;
      }
      rows.push({ operation: `${api}, ${v.name}`, median: ns(m), against });
    });
    const sdkVariant = variants.find((v) => v.reader);
    rows.push({
      operation: `${api}, SDK MeterProvider: the collection after each round, per record`,
      median: ns(median(sdkVariant.samples[collectKey])),
      against: '—',
    });
  }
  {
    const v = variants.find((x) => x.reader);
    rows.push({
      operation: 'SDK MeterProvider: one collection with nothing new (the fixed part of the rows above, for the whole collection)',
      median: ns(median(v.idleCollect)),
      against: `${ns(median(v.idleCollect) / RECORDS)} per record of a ${RECORDS}-record round`,
    });
  }
  // The floor under the collection rows: the SDK's own Histogram.record of one value with the
  // attributes of record.duration, on a provider of its own.
  {
    const own = sdk();
    const h = own.provider.getMeter('floor').createHistogram('floor', { unit: 's' });
    const attrs = Object.freeze({ 'session_awareness.store': 'sqlite', api: 'sync' });
    const per = [];
    for (let r = 0; r <= ROUNDS; r++) {
      const t = hr();
      for (let i = 0; i < 10000; i++) h.record(i * 1e-6, attrs);
      if (r > 0) per.push(Number(hr() - t) / 10000);
    }
    await own.provider.shutdown();
    rows.push({ operation: "the SDK's own Histogram.record of one value (two attributes), for comparison", median: ns(median(per)), against: '—' });
  }
  const head = ['Operation', 'Median per record', 'Difference (median of the rounds)'];
  const lines = [head, head.map(() => '---'), ...rows.map((r) => [r.operation, r.median, r.against])];
  const text = lines.map((l) => `| ${l.join(' | ')} |`).join('\n');
  console.log(`\n${text}\n\n${ROUNDS} rounds of ${RECORDS} records per store (after one warm-up), load average ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}`);
  if (jsonAt > 0) {
    const samples = Object.fromEntries(variants.map((v) => [v.name, v.samples]));
    fs.writeFileSync(process.argv[jsonAt + 1], JSON.stringify({ samples, rows, table: text }, null, 2));
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
