'use strict';
// `npm run bench:pg`: the PostgreSQL store against the node-postgres baseline
// (bench/postgres/baseline.js: the same statements, one transaction per record, a pool of 10)
// on one throwaway cluster (fsync on), each in a schema of its own, rounds interleaved (who
// goes first rotates) so both see the same machine load. Medians of the rounds:
//
// - records/s at 1, 8 and 64 in flight, on one session and over 64 sessions;
// - changesSince of 200 events, stateVersions of 500 keys (µs per call);
// - the event loop's delay p99 while 64 records are in flight on the store, against the idle
//   loop's over the same time;
// - the cross-host notice latency (p50, p99 over 200 notices): from just before gateway process
//   A calls `recordAsync` to gateway process B's `wake` callback (B serves the watcher,
//   `serveWatchers`, with `wakeCoalesceMs: 0`), and to B's `onNotice` listener; both times are
//   `performance.timeOrigin + performance.now()`, each read in its own process on one machine;
// - four gateway processes on one database, 64 in flight each: events per second together.
//
//   node bench/postgres/store.js [--rounds 5] [--records 2000] [--latency-only [--notices 200]]

const { fork } = require('node:child_process');
const os = require('node:os');
const path = require('node:path');
const { monitorEventLoopDelay } = require('node:perf_hooks');
const { Pool } = require('pg');

const { SessionState } = require('../..');
const { startCluster } = require('../../scripts/pg/cluster');
const { applySchema } = require('../../scripts/pg/schema');
const { baseline } = require('./baseline');
const { humanMessage } = require('../messages');

const WATCHER = 'agent:main:main';
const IN_FLIGHT = [1, 8, 64];

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const pct = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))];
const arg = (name, fallback) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};

const input = (sessionKey, n, watchers = [WATCHER]) => humanMessage(sessionKey, n, watchers);

async function inFlight(record, count, k, sessions, tag) {
  const t0 = process.hrtime.bigint();
  let issued = 0;
  const lane = async () => {
    while (issued < count) {
      const n = issued++;
      await record(input(`agent:main:subagent:${tag}-${n % sessions}`, n));
    }
  };
  await Promise.all(Array.from({ length: Math.min(k, count) }, lane));
  return (count * 1e9) / Number(process.hrtime.bigint() - t0);
}

async function perCall(ops, fn) {
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < ops; i++) await fn();
  return Number(process.hrtime.bigint() - t0) / ops;
}

/** A gateway process (bench/postgres/gateway.js) on `url`, with `options` added. */
async function gateway(url, options = {}) {
  const child = fork(path.join(__dirname, 'gateway.js'), [url, JSON.stringify({ syncIntervalMs: 200, ...options })]);
  const waiting = new Map();
  const listeners = [];
  let id = 0;
  child.on('message', (m) => {
    if (m.type === 'reply') {
      const w = waiting.get(m.id);
      waiting.delete(m.id);
      if (m.error) w.reject(new Error(m.error));
      else w.resolve(m.result);
    } else {
      for (const l of listeners) l(m);
    }
  });
  await new Promise((resolve, reject) => {
    child.on('message', (m) => {
      if (m.type === 'ready') resolve();
      if (m.type === 'failed') reject(new Error(m.error));
    });
    child.once('exit', (code) => reject(new Error(`gateway exited with ${code}`)));
  });
  return {
    on: (l) => listeners.push(l),
    call: (cmd, args) =>
      new Promise((resolve, reject) => {
        const n = ++id;
        waiting.set(n, { resolve, reject });
        child.send({ id: n, cmd, args });
      }),
    stop: () => new Promise((resolve) => {
      child.once('exit', resolve);
      child.disconnect();
    }),
  };
}

/**
 * Latency (ms) per notice from just before A's `recordAsync` call to B's `wake` callback and to
 * B's `onNotice` listener, B serving the watcher with `wakeCoalesceMs: 0`.
 */
async function crossHostLatency(url, notices) {
  const a = await gateway(url);
  const b = await gateway(url, { wakeCoalesceMs: 0, serveWatchers: [WATCHER] });
  try {
    const targets = Array.from({ length: notices }, (_, i) => `agent:main:subagent:latency-${i}`);
    await b.call('watch', { watcher: WATCHER, targets });
    const heard = new Map();
    const woken = new Map();
    b.on((m) => {
      if (m.type === 'notice' && !heard.has(m.target)) heard.set(m.target, m.at);
      // The wake request names the target whose notice made it due (`session-state:<target>`).
      if (m.type === 'wake' && !woken.has(m.reason)) woken.set(m.reason, m.at);
    });
    const wake = [];
    const notice = [];
    for (const [n, t] of targets.entries()) {
      const { t0 } = await a.call('record', { session: t, n });
      const reason = `session-state:${t}`;
      const until = Date.now() + 10000;
      while (!(heard.has(t) && woken.has(reason)) && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 0));
      if (!heard.has(t)) throw new Error(`no notice for ${t} on the other gateway within 10 s`);
      if (!woken.has(reason)) throw new Error(`no wake for ${t} on the other gateway within 10 s`);
      notice.push(heard.get(t) - t0);
      wake.push(woken.get(reason) - t0);
      // The watcher takes its notices, as a woken gateway does: the next notice wakes it again.
      await b.call('drain', { watcher: WATCHER });
    }
    return { wake, notice };
  } finally {
    await a.stop();
    await b.stop();
  }
}

/** Four gateway processes, 64 records in flight each, own sessions: events/s together. */
async function fourGateways(url, count) {
  const gs = await Promise.all([0, 1, 2, 3].map(() => gateway(url)));
  try {
    const t0 = process.hrtime.bigint();
    await Promise.all(
      gs.map((g, i) => g.call('throughput', { tag: `four-${Date.now()}-${i}`, count, k: 64, sessions: 64, watchers: [WATCHER] })),
    );
    return (4 * count * 1e9) / Number(process.hrtime.bigint() - t0);
  } finally {
    await Promise.all(gs.map((g) => g.stop()));
  }
}

async function loopDelay(during) {
  const h = monitorEventLoopDelay({ resolution: 1 });
  h.enable();
  const t0 = Date.now();
  await during();
  h.disable();
  return { p99: h.percentile(99) / 1e6, ms: Date.now() - t0 };
}

const quantiles = (xs) => `p50 ${pct(xs, 0.5).toFixed(1)} ms, p99 ${pct(xs, 0.99).toFixed(1)} ms`;

function printLatency({ wake, notice }) {
  console.log(`| cross-host latency to \`wake\`, ${wake.length} notices | ${quantiles(wake)} | — | — |`);
  console.log(`| cross-host latency to \`onNotice\`, ${notice.length} notices | ${quantiles(notice)} | — | — |`);
}

/** `--latency-only`: the cross-host latency alone, on a cluster of its own. */
async function latencyOnly() {
  const load0 = os.loadavg();
  const cluster = await startCluster({ name: 'bench-latency', durable: true });
  try {
    // The schema exists before the gateways open at once.
    const s = await SessionState.open(cluster.url, {});
    await s.closeAsync();
    const latency = await crossHostLatency(cluster.url, arg('--notices', 200));
    const pool = new Pool({ connectionString: cluster.url, max: 1 });
    const version = (await pool.query('SHOW server_version')).rows[0].server_version;
    await pool.end();
    console.log(
      `PostgreSQL ${version} (throwaway cluster, fsync on), Node ${process.version}, ${os.cpus().length} cores; ` +
        `load average ${load0.map((x) => x.toFixed(2)).join(' ')} ` +
        `at the start, ${os.loadavg().map((x) => x.toFixed(2)).join(' ')} at the end`,
    );
    console.log('\n| Measurement | store | node-postgres baseline | ratio |\n| --- | --- | --- | --- |');
    printLatency(latency);
  } finally {
    await cluster.stop();
  }
}

async function main() {
  if (process.argv.includes('--latency-only')) return latencyOnly();
  const rounds = arg('--rounds', 5);
  const records = arg('--records', 2000);
  const load0 = os.loadavg();
  const cluster = await startCluster({ name: 'bench-store', durable: true });
  const pool = new Pool({ connectionString: cluster.url, max: 10, application_name: 'sa-bench-baseline' });
  pool.on('error', () => {});
  const errors = [];
  const store = await SessionState.open(cluster.url, { wake: () => {}, onError: (e) => errors.push(e) });
  try {
    const setup = await pool.connect();
    await applySchema(setup, 'sa_baseline');
    setup.release();
    const base = baseline(pool, 'sa_baseline');
    const impls = {
      baseline: {
        record: (i) => base.record(i),
        changesSince: (k) => base.changesSince(k, 0, 200),
        stateVersions: (keys) => base.stateVersions(keys),
      },
      store: {
        record: (i) => store.recordAsync(i),
        changesSince: (k) => store.changesSinceAsync(k, 0, { limit: 200 }),
        stateVersions: (keys) => store.stateVersionsAsync(keys.map((sessionKey) => ({ sessionKey }))),
      },
    };
    const changesKey = 'agent:main:subagent:changes';
    const keys = Array.from({ length: 500 }, (_, i) => `agent:main:subagent:v${i}`);
    for (const impl of Object.values(impls)) {
      for (let i = 0; i < 200; i++) await impl.record({ ...input(changesKey, i), watchers: [] });
      for (const k of keys) await impl.record({ ...input(k, 0), watchers: [] });
    }
    const got = await store.changesSinceAsync(changesKey, 0, { limit: 200 });
    if (got.stateChanges.events.length !== 200) throw new Error(`changesSince returned ${got.stateChanges.events.length} events`);

    const samples = {};
    const put = (name, impl, v) => ((samples[name] ??= { baseline: [], store: [] })[impl].push(v));
    for (let r = 0; r < rounds; r++) {
      const order = r % 2 ? ['store', 'baseline'] : ['baseline', 'store'];
      for (const [label, sessions] of [['one session', 1], ['64 sessions', 64]]) {
        for (const k of IN_FLIGHT) {
          for (const name of order) {
            put(`record, ${k} in flight, ${label}`, name, await inFlight(impls[name].record, records, k, sessions, `${name}r${r}k${k}s${sessions}`));
          }
        }
      }
      for (const name of order) {
        put('changesSince of 200 events', name, await perCall(200, () => impls[name].changesSince(changesKey)));
        put('stateVersions of 500 keys', name, await perCall(200, () => impls[name].stateVersions(keys)));
      }
      const busy = await loopDelay(() => inFlight(impls.store.record, records, 64, 64, `loop-r${r}`));
      const idle = await loopDelay(() => new Promise((resolve) => setTimeout(resolve, busy.ms)));
      put('event-loop delay p99, 64 in flight (ms)', 'store', busy.p99);
      put('event-loop delay p99, idle loop (ms)', 'store', idle.p99);
      process.stderr.write(`round ${r + 1}/${rounds} done\n`);
    }
    const latency = await crossHostLatency(cluster.url, 200);
    const together = [];
    for (let r = 0; r < Math.min(rounds, 3); r++) together.push(await fourGateways(cluster.url, records));
    if (errors.length > 0) throw new Error(`onError: ${errors[0].code}: ${errors[0].message}`);

    const version = (await pool.query('SHOW server_version')).rows[0].server_version;
    console.log(
      `PostgreSQL ${version} (throwaway cluster, fsync on), Node ${process.version}, ${os.cpus().length} cores; ` +
        `${rounds} rounds, ${records} records per throughput round; load average ` +
        `${load0.map((x) => x.toFixed(2)).join(' ')} at the start, ${os.loadavg().map((x) => x.toFixed(2)).join(' ')} at the end`,
    );
    console.log('\n| Measurement | store | node-postgres baseline | ratio |\n| --- | --- | --- | --- |');
    for (const [name, s] of Object.entries(samples)) {
      const rate = name.startsWith('record');
      const ms = name.includes('(ms)');
      const fmt = (v) => (rate ? `${Math.round(v).toLocaleString('en-US')}/s` : ms ? `${v.toFixed(2)} ms` : `${(v / 1000).toFixed(0)} µs`);
      const b = s.baseline.length ? median(s.baseline) : null;
      const st = median(s.store);
      const ratio = b === null ? '—' : `${(rate ? st / b : b / st).toFixed(2)}×`;
      console.log(`| ${name} | ${fmt(st)} | ${b === null ? '—' : fmt(b)} | ${ratio} |`);
    }
    printLatency(latency);
    console.log(
      `| four gateway processes, 64 in flight each | ${Math.round(median(together)).toLocaleString('en-US')}/s together | — | — |`,
    );
  } finally {
    await store.closeAsync();
    await pool.end();
    await cluster.stop();
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
