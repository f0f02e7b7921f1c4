'use strict';
// `npm run bench:follow`: following a session live (docs/semantics.md#follow).
//
// - Latency from a commit to the follower's batch, p50 and p99 over `--samples` commits, one
//   at a time (the follower waiting each time):
//   - in the same process, from just before `record` (sync) or `recordAsync` to the batch;
//   - another process on the same file (bench/follow-writer.js): from just before its
//     `recordAsync` to this process's batch, at `syncIntervalMs` 100 (the default) and 20,
//     each commit at a random phase of the poll;
//   - another host on PostgreSQL (a writer process with a store of its own on a throwaway
//     cluster): a session whose records open a notice for a watcher this store serves (the
//     follower's gateway drains it, as a woken gateway does), one nobody watches (the hint of
//     a session another host follows), and a writer that sends no hint (`syncIntervalMs` 0:
//     the periodic catch-up every 100 ms, commits at a random phase of it).
//   Times are `performance.timeOrigin + performance.now()`, each read in its own process on
//   one machine.
// - Events per second one follower keeps up with: 64 `recordAsync` in flight on one session
//   in this process while one follower (limit 200) takes every batch, against the same writes
//   with nobody following.
// - A stalled follower's memory: the heap after 20,000 records of about 1 KiB while a follower
//   that took one batch is not pulled, against the same with no follower (after a full GC).
//
// Rounds are interleaved (`--rounds`, default 3); medians of the rounds are printed, with the
// load average before and after.
//
//   node --expose-gc bench/follow.js [--rounds 3] [--samples 200] [--no-pg]

const { fork } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const { SessionState } = require('..');

const K = 'agent:main:subagent:followed';
const MAIN = 'agent:main:main';

const arg = (name, fallback) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
const now = () => performance.timeOrigin + performance.now();
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const pct = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))];
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const input = (n, watchers, payload = { channel: 'telegram' }) => ({
  sessionKey: K,
  kind: 'human_direct_message',
  actorType: 'human',
  actorId: 'telegram:42',
  summary: `human message via telegram ${n}`,
  payload,
  ...(watchers ? { watchers } : {}),
});

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sa-bench-follow-'));
let files = 0;
const freshFile = () => path.join(dir, `f-${++files}.sqlite`);

/** A writer process on `where` (bench/follow-writer.js). */
async function writer(where, options = {}) {
  const child = fork(path.join(__dirname, 'follow-writer.js'), [where, JSON.stringify(options)], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const waiting = new Map();
  let id = 0;
  await new Promise((resolve, reject) => {
    child.on('message', (m) => {
      if (m.ready) resolve();
      else if (m.failed) reject(new Error(`writer failed: ${m.code} ${m.message}`));
      else {
        const w = waiting.get(m.id);
        waiting.delete(m.id);
        if (m.error) w.reject(Object.assign(new Error(m.error.message), m.error));
        else w.resolve(m.result);
      }
    });
  });
  return {
    call: (cmd, args) =>
      new Promise((resolve, reject) => {
        id += 1;
        waiting.set(id, { resolve, reject });
        child.send({ id, cmd, args });
      }),
    stop: () =>
      new Promise((resolve) => {
        child.once('exit', resolve);
        child.disconnect();
      }),
  };
}

/** The batch a pending `next()` resolves to, with when it arrived. */
const arrival = (p) =>
  p.then((r) => {
    if (r.done) throw new Error('the follower ended');
    return { batch: r.value, at: now() };
  });

/** In this process: `record` or `recordAsync`, then the batch. */
async function sameProcess(samples, api) {
  const state = new SessionState(freshFile());
  const f = state.follow(K);
  try {
    state.record(input(-1));
    await f.next();
    const lat = [];
    for (let n = 0; n < samples; n++) {
      const p = arrival(f.next());
      const t0 = now();
      if (api === 'sync') state.record(input(n));
      else void state.recordAsync(input(n));
      const { at } = await p;
      lat.push(at - t0);
    }
    return lat;
  } finally {
    await f.return();
    state.close();
  }
}

/** Another process on the same file writes; this one follows. */
async function otherProcess(samples, syncIntervalMs) {
  const file = freshFile();
  const state = new SessionState(file, { syncIntervalMs });
  const w = await writer(file, { syncIntervalMs });
  const f = state.follow(K);
  try {
    await w.call('record', { session: K, n: -1 });
    await f.next();
    const lat = [];
    for (let n = 0; n < samples; n++) {
      // At a random phase of the poll: a commit made right after the batch of the previous
      // one would always wait a whole interval.
      await sleep(Math.random() * syncIntervalMs);
      const p = arrival(f.next());
      const [{ t0 }, { at }] = await Promise.all([w.call('record', { session: K, n }), p]);
      lat.push(at - t0);
    }
    return lat;
  } finally {
    await f.return();
    await w.stop();
    state.close();
  }
}

/**
 * Another host on PostgreSQL writes; this store follows. `how`: `watched` (its records open a
 * notice for a watcher this store serves: the notice hint names the session too), `unwatched`
 * (the hint of a session another host follows), `no-hint` (the writer sends no hint,
 * `syncIntervalMs: 0`: the periodic catch-up, every 100 ms).
 */
async function otherHost(url, samples, how, schema) {
  const options = { schema, syncIntervalMs: 100 };
  const state = await SessionState.open(url, { ...options, serveWatchers: [MAIN] });
  const w = await writer(url, how === 'no-hint' ? { schema, syncIntervalMs: 0 } : options);
  const f = state.follow(K);
  const watchers = how === 'watched' ? [MAIN] : undefined;
  try {
    // The writer hears the follower's announcement (or its answer to the writer's question).
    await sleep(300);
    await w.call('record', { session: K, n: -1, watchers });
    await f.next();
    const lat = [];
    for (let n = 0; n < samples; n++) {
      // The served watcher takes its notice, as a woken gateway does: the next record opens
      // a new one, and its hint.
      if (how === 'watched') await state.drainAsync(MAIN);
      if (how === 'no-hint') await sleep(Math.random() * 100);
      const p = arrival(f.next());
      const [{ t0 }, { at }] = await Promise.all([w.call('record', { session: K, n, watchers }), p]);
      lat.push(at - t0);
    }
    return lat;
  } finally {
    await f.return();
    await w.stop();
    await state.closeAsync();
  }
}

/** 64 `recordAsync` in flight on one session, with one follower taking every batch or none. */
async function throughput(count, following) {
  const state = new SessionState(freshFile());
  const f = following ? state.follow(K) : null;
  let seen = 0;
  const reader = f
    ? (async () => {
        for await (const b of f) {
          seen += b.events.length;
          if (seen >= count) break;
        }
      })()
    : Promise.resolve();
  const t0 = process.hrtime.bigint();
  let issued = 0;
  const lane = async () => {
    while (issued < count) await state.recordAsync(input(issued++));
  };
  await Promise.all(Array.from({ length: 64 }, lane));
  await reader;
  const secs = Number(process.hrtime.bigint() - t0) / 1e9;
  state.close();
  return count / secs;
}

/** Heap growth (bytes, after a full GC) over `count` records of ~1 KiB, with a stalled follower or none. */
async function stalledHeap(count, stalled = true) {
  const state = new SessionState(freshFile());
  const f = stalled ? state.follow(K) : null;
  const first = f ? f.next() : null;
  state.record(input(-1));
  if (first) await first;
  const heap = () => {
    global.gc();
    global.gc();
    return process.memoryUsage().heapUsed;
  };
  const before = heap();
  const payload = { text: 'x'.repeat(900) };
  for (let i = 0; i < count; i += 100) {
    await Promise.all(Array.from({ length: 100 }, (_, j) => state.recordAsync(input(i + j, undefined, payload))));
  }
  const grown = heap() - before;
  if (f) await f.return();
  state.close();
  return grown;
}

const q = (xs) => `p50 ${pct(xs, 0.5).toFixed(2)} ms, p99 ${pct(xs, 0.99).toFixed(2)} ms`;

async function main() {
  if (typeof global.gc !== 'function') throw new Error('run with node --expose-gc');
  const rounds = arg('--rounds', 3);
  const samples = arg('--samples', 200);
  const withPg = !process.argv.includes('--no-pg');
  const load0 = os.loadavg();
  let cluster = null;
  if (withPg) {
    const { startCluster } = require('../scripts/pg/cluster');
    cluster = await startCluster({ name: 'bench-follow', durable: true });
  }
  const results = new Map();
  const add = (name, v) => results.set(name, [...(results.get(name) ?? []), v]);
  try {
    for (let r = 0; r < rounds; r++) {
      add('same process, record', await sameProcess(samples, 'sync'));
      add('same process, recordAsync', await sameProcess(samples, 'async'));
      add('other process, syncIntervalMs 100', await otherProcess(samples, 100));
      add('other process, syncIntervalMs 20', await otherProcess(samples, 20));
      if (cluster) {
        add('other host, watched session (notice hint)', await otherHost(cluster.url, samples, 'watched', `follow_w${r}`));
        add('other host, unwatched session (follow hint)', await otherHost(cluster.url, samples, 'unwatched', `follow_u${r}`));
        add('other host, writer sends no hint (catch-up, syncIntervalMs 100)', await otherHost(cluster.url, samples, 'no-hint', `follow_n${r}`));
      }
      add('events/s, one follower', await throughput(20000, true));
      add('events/s, no follower', await throughput(20000, false));
      add('heap growth, stalled follower', await stalledHeap(20000, true));
      add('heap growth, no follower', await stalledHeap(20000, false));
      add('heap growth, stalled follower, 5,000 records', await stalledHeap(5000, true));
      add('heap growth, stalled follower, 80,000 records', await stalledHeap(80000, true));
    }
  } finally {
    if (cluster) await cluster.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
  console.log(`| follow (${rounds} rounds, ${samples} samples each; medians of the rounds) | value |`);
  console.log('| --- | --- |');
  for (const [name, vs] of results) {
    if (Array.isArray(vs[0])) {
      const p50 = median(vs.map((xs) => pct(xs, 0.5)));
      const p99 = median(vs.map((xs) => pct(xs, 0.99)));
      console.log(`| latency ${name} | p50 ${p50.toFixed(2)} ms, p99 ${p99.toFixed(2)} ms (rounds: ${vs.map(q).join('; ')}) |`);
    } else if (name.startsWith('heap')) {
      console.log(`| ${name}${name.includes('records') ? '' : ' (20,000 records of ~1 KiB)'} | ${(median(vs) / 1024).toFixed(0)} KiB (rounds: ${vs.map((v) => (v / 1024).toFixed(0)).join(', ')}) |`);
    } else {
      console.log(`| ${name} | ${median(vs).toFixed(0)} (rounds: ${vs.map((v) => v.toFixed(0)).join(', ')}) |`);
    }
  }
  console.log(`load average before ${load0.map((l) => l.toFixed(2)).join(' ')}, after ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`);
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
