'use strict';
// The Promise API against the synchronous one, in one run (`npm run bench:async`; also part of
// `npm run bench`, see bench/run.js). Three measurements, each in rounds that alternate the
// two APIs so both see the same machine load; medians of the rounds are reported.
//
// 1. Event-loop stalls while a second process writes the same file: this process records
//    ASYNC_RECORDS events (one call per turn of the loop; the Promise API with up to
//    ASYNC_WINDOW in flight) while a child (`node bench/async.js writer`) records as many
//    synchronously, back to back, into the same file. Per API: the time each call holds the
//    JS thread (p50/p99/p99.9/worst) and `perf_hooks.monitorEventLoopDelay` at 1 ms
//    resolution. That histogram records whole timer intervals, so the delay reported is the
//    interval less the 1 ms the timer was asked for. A third run in each round records
//    nothing here while the second process writes: the delay of an idle loop on this
//    machine at that moment, the floor under both.
// 2. JS-thread time per `recordAsync`: the main thread's own CPU time
//    (/proc/self/task/<pid>/schedstat, the kernel's per-thread clock: the writer thread's work
//    is not in it) over a run of ASYNC_THREAD_RECORDS records with 64 in flight, divided by
//    the records; the promises' settling and the loop's own work included (the loop alone is
//    measured too). Beside it, the submit loop alone: the wall time of 64 calls issued back
//    to back.
// 3. Throughput with 1, 8 and 64 records in flight, against a synchronous loop in the same
//    round; no second process.
//
// Output: a Markdown table, and with `--json <file>` the samples and table rows as JSON
// (bench/run.js reads them).

const { fork } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { monitorEventLoopDelay } = require('node:perf_hooks');

const ROUNDS = Number(process.env.BENCH_ASYNC_ROUNDS) || 7;
const RECORDS = Number(process.env.ASYNC_RECORDS) || 5000;
const WINDOW = Number(process.env.ASYNC_WINDOW) || 8;
const RATE_RECORDS = Number(process.env.ASYNC_RATE_RECORDS) || 2000;
// The kernel's per-thread clock of a running thread lags by up to a scheduler tick (a few
// milliseconds): enough records that the lag stays within a few percent.
const THREAD_RECORDS = Number(process.env.ASYNC_THREAD_RECORDS) || 20000;
const IN_FLIGHT = [1, 8, 64];
const MAIN = 'agent:main:main';
const RESOLUTION_MS = 1;

const hr = () => process.hrtime.bigint();

function loadApi() {
  return require('..').SessionState;
}

/** One record input: a notify kind with one watcher, as in bench/workloads.js. */
function input(session, n) {
  return {
    sessionKey: session,
    kind: 'human_direct_message',
    actorType: 'human',
    actorId: 'telegram:42',
    summary: 'human message via telegram',
    payload: { n },
    watchers: [MAIN],
  };
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

/** The value at quantile `q` of the ascending `sorted` (nearest rank). */
function quantile(sorted, q) {
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)];
}

function callStats(ns) {
  const s = [...ns].sort((a, b) => a - b);
  return { p50: quantile(s, 0.5), p99: quantile(s, 0.99), p999: quantile(s, 0.999), worst: s[s.length - 1] };
}

/** The main thread's CPU time in nanoseconds (Linux), else null. */
function threadCpuNs() {
  try {
    return Number(fs.readFileSync(`/proc/self/task/${process.pid}/schedstat`, 'utf8').split(' ')[0]);
  } catch {
    return null;
  }
}

function removeDb(file) {
  for (const suffix of ['', '-wal', '-shm']) fs.rmSync(file + suffix, { force: true });
}

function openStore(SessionState, file, errors) {
  return new SessionState(file, { wake: () => {}, onError: (err) => errors.push(err) });
}

function checkErrors(errors, what) {
  if (errors.length > 0) throw new Error(`${what}: onError was called: ${errors[0].code}: ${errors[0].message}`);
}

// ---- 1. event-loop stalls with a second writer ------------------------------------------------

/** Records `count` events, one call per turn of the loop, through `record`. */
function recordSync(store, session, count, calls) {
  return new Promise((resolve, reject) => {
    let n = 0;
    const step = () => {
      const t0 = hr();
      const e = store.record(input(session, n));
      calls.push(Number(hr() - t0));
      if (e === null) return reject(new Error(`record returned null (${session} ${n})`));
      n += 1;
      if (n < count) setImmediate(step);
      else resolve();
    };
    setImmediate(step);
  });
}

/** Records `count` events through `recordAsync` with at most `window` in flight; each call is
 * issued in a turn of its own. Resolves with the sequences in call order. */
function recordAsync(store, session, count, window, calls = null) {
  return new Promise((resolve, reject) => {
    const sequences = new Array(count);
    let issued = 0;
    let settled = 0;
    let failed = false;
    const settle = (n) => (e) => {
      if (e === null) {
        failed = true;
        return reject(new Error(`recordAsync resolved null (${session} ${n})`));
      }
      sequences[n] = e.sequence;
      settled += 1;
      if (settled === count) resolve(sequences);
      else if (issued < count && issued - settled < window) setImmediate(step);
    };
    const step = () => {
      if (failed || issued >= count || issued - settled >= window) return;
      const n = issued;
      issued += 1;
      const t0 = calls ? hr() : 0n;
      const p = store.recordAsync(input(session, n));
      if (calls) calls.push(Number(hr() - t0));
      p.then(settle(n), (err) => {
        failed = true;
        reject(err);
      });
      if (issued < count && issued - settled < window) setImmediate(step);
    };
    setImmediate(step);
  });
}

/** The second process: records `count` events back to back into `file` on `go`. */
function writerRole() {
  const SessionState = loadApi();
  let job = null;
  process.on('message', (msg) => {
    if (msg.cmd === 'exit') return process.disconnect();
    if (job === null) {
      const errors = [];
      job = { ...msg, errors, store: openStore(SessionState, msg.file, errors) };
      return process.send({ ready: true });
    }
    const { store, count, errors } = job;
    job = null;
    const started = performance.timeOrigin + performance.now();
    for (let n = 0; n < count; n += 1) {
      if (store.record(input(`agent:main:subagent:writer-${n % 2}`, n)) === null) break;
    }
    const ended = performance.timeOrigin + performance.now();
    store.close();
    process.send({ done: true, started, ended, errors: errors.map((e) => e.code) });
  });
}

function startWriter() {
  const child = fork(__filename, ['writer'], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const next = () => new Promise((resolve) => child.once('message', resolve));
  return {
    async run(file, count, body) {
      const ready = next();
      child.send({ file, count });
      await ready;
      const done = next();
      child.send({ go: true });
      const mine = await body(done);
      const theirs = await done;
      if (theirs.errors.length > 0) throw new Error(`the second writer's onError: ${theirs.errors[0]}`);
      return { mine, theirs };
    },
    stop() {
      child.send({ cmd: 'exit' });
    },
  };
}

/** One round of measurement 1 for one API. */
async function stallRound(SessionState, writer, dir, api) {
  const file = path.join(dir, `stall-${api}.sqlite`);
  removeDb(file);
  const errors = [];
  // Created before both open it, so the two do not race on the schema.
  new SessionState(file, {}).close();
  const store = openStore(SessionState, file, errors);
  const calls = [];
  const eld = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
  const { mine, theirs } = await writer.run(file, RECORDS, async (writerDone) => {
    eld.enable();
    const started = performance.timeOrigin + performance.now();
    if (api === 'sync') await recordSync(store, 'agent:main:subagent:bench', RECORDS, calls);
    else if (api === 'async') await recordAsync(store, 'agent:main:subagent:bench', RECORDS, WINDOW, calls);
    else await writerDone;
    const ended = performance.timeOrigin + performance.now();
    eld.disable();
    return { started, ended };
  });
  await store.closeAsync();
  checkErrors(errors, `${api} stall round`);
  // How much of this process's recording ran while the second process was writing.
  const overlap = Math.max(0, Math.min(mine.ended, theirs.ended) - Math.max(mine.started, theirs.started));
  const less = (ns) => Math.max(0, ns - RESOLUTION_MS * 1e6);
  removeDb(file);
  return {
    calls: calls.length > 0 ? callStats(calls) : null,
    loopDelay: {
      p50: less(eld.percentile(50)),
      p99: less(eld.percentile(99)),
      p999: less(eld.percentile(99.9)),
      worst: less(eld.max),
      samples: eld.count,
    },
    ms: mine.ended - mine.started,
    writerMs: theirs.ended - theirs.started,
    overlap: overlap / (mine.ended - mine.started),
  };
}

// ---- 2. JS-thread time per recordAsync ----------------------------------------------------------

/** Records `count` events with 64 in flight, issued in bursts of 64: the main thread's CPU time
 * per record, and the wall time per call of each burst's submit loop. With `api` 'loop', the
 * same loop with an already resolved promise in place of each call: what the benchmark's own
 * work (building the inputs, awaiting the bursts) costs the thread. */
async function threadRound(SessionState, dir, api) {
  const file = path.join(dir, `thread-${api}.sqlite`);
  removeDb(file);
  const errors = [];
  const store = openStore(SessionState, file, errors);
  const burst = 64;
  const submit = [];
  const cpu0 = threadCpuNs();
  const t0 = hr();
  for (let done = 0; done < THREAD_RECORDS; done += burst) {
    const n = Math.min(burst, THREAD_RECORDS - done);
    if (api === 'sync') {
      for (let i = 0; i < n; i += 1) store.record(input('agent:main:subagent:thread', done + i));
      continue;
    }
    const promises = new Array(n);
    const s0 = hr();
    if (api === 'loop') {
      for (let i = 0; i < n; i += 1) promises[i] = Promise.resolve(input('agent:main:subagent:thread', done + i));
    } else {
      for (let i = 0; i < n; i += 1) promises[i] = store.recordAsync(input('agent:main:subagent:thread', done + i));
    }
    submit.push(Number(hr() - s0) / n);
    const events = await Promise.all(promises);
    if (events.includes(null)) throw new Error('recordAsync resolved null');
  }
  const wall = Number(hr() - t0);
  const cpu1 = threadCpuNs();
  await store.closeAsync();
  checkErrors(errors, `${api} thread round`);
  removeDb(file);
  return {
    threadCpuPerRecord: cpu0 === null ? null : (cpu1 - cpu0) / THREAD_RECORDS,
    wallPerRecord: wall / THREAD_RECORDS,
    submitPerCall: submit.length > 0 ? median(submit) : null,
  };
}

// ---- 3. throughput --------------------------------------------------------------------------------

async function rateRound(SessionState, dir, mode) {
  const file = path.join(dir, `rate-${mode}.sqlite`);
  const errors = [];
  const store = openStore(SessionState, file, errors);
  const t0 = hr();
  if (mode === 'sync') {
    for (let n = 0; n < RATE_RECORDS; n += 1) {
      if (store.record(input('agent:main:subagent:rate', n)) === null) throw new Error('record returned null');
    }
  } else {
    await recordInFlight(store, RATE_RECORDS, mode);
  }
  const ns = Number(hr() - t0);
  await store.closeAsync();
  checkErrors(errors, `rate round ${mode}`);
  return (RATE_RECORDS * 1e9) / ns;
}

/** Keeps `k` calls in flight until `count` have resolved: each resolution issues the next. */
function recordInFlight(store, count, k) {
  return new Promise((resolve, reject) => {
    let issued = 0;
    let settled = 0;
    const issue = () => {
      const n = issued;
      issued += 1;
      store.recordAsync(input('agent:main:subagent:rate', n)).then((e) => {
        if (e === null) return reject(new Error('recordAsync resolved null'));
        settled += 1;
        if (issued < count) issue();
        else if (settled === count) resolve();
      }, reject);
    };
    for (let i = 0; i < Math.min(k, count); i += 1) issue();
  });
}

// ---- the run --------------------------------------------------------------------------------------

/** Runs every round; returns the samples (per round) and the table rows. */
async function measureAsync(log = console.log) {
  const SessionState = loadApi();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'session-awareness-bench-async-'));
  const writer = startWriter();
  const samples = { stall: { sync: [], async: [], idle: [] }, thread: { sync: [], async: [], loop: [] }, rate: { sync: [] } };
  for (const k of IN_FLIGHT) samples.rate[k] = [];
  try {
    // One warm-up round of each, not kept.
    await threadRound(SessionState, dir, 'async');
    for (let r = 0; r < ROUNDS; r += 1) {
      const order = r % 2 === 0 ? ['sync', 'async'] : ['async', 'sync'];
      for (const api of [...order, 'idle']) samples.stall[api].push(await stallRound(SessionState, writer, dir, api));
      for (const api of [...order, 'loop']) samples.thread[api].push(await threadRound(SessionState, dir, api));
      const modes = ['sync', ...IN_FLIGHT];
      for (let k = 0; k < modes.length; k += 1) {
        const mode = modes[(r + k) % modes.length];
        samples.rate[mode].push(await rateRound(SessionState, dir, mode));
      }
      const s = samples.stall;
      log(
        `  round ${r + 1}/${ROUNDS}: loop delay p99 sync ${formatNs(s.sync[r].loopDelay.p99)}, async ${formatNs(s.async[r].loopDelay.p99)}, idle ${formatNs(s.idle[r].loopDelay.p99)}; ` +
          `main-thread CPU per recordAsync ${formatNs(samples.thread.async[r].threadCpuPerRecord ?? NaN)} (own loop ${formatNs(samples.thread.loop[r].threadCpuPerRecord ?? NaN)}); ` +
          `rate sync ${Math.round(samples.rate.sync[r])}/s, 64 in flight ${Math.round(samples.rate[64][r])}/s`,
      );
    }
  } finally {
    writer.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
  return { samples, rows: rows(samples) };
}

function formatNs(ns) {
  if (!Number.isFinite(ns)) return 'n/a';
  if (ns < 1e3) return `${ns.toFixed(0)} ns`;
  if (ns < 1e6) return `${(ns / 1e3).toFixed(ns < 1e4 ? 2 : 1)} µs`;
  if (ns < 1e9) return `${(ns / 1e6).toFixed(ns < 1e7 ? 2 : 1)} ms`;
  return `${(ns / 1e9).toFixed(2)} s`;
}

/** The table rows: the Promise API (addon column) against the synchronous API (reference
 * column), in bench/run.js's row shape. */
function rows(samples) {
  const out = [];
  const row = (operation, addon, reference, ratio, target, met) =>
    out.push({ operation, addon, reference, ratio, target, met: met === null ? '—' : met ? 'yes' : 'NO' });
  const med = (list, pick) => median(list.map(pick));
  const { stall, thread, rate } = samples;
  const delay = (api, q) => med(stall[api], (s) => s.loopDelay[q]);
  const call = (api, q) => med(stall[api], (s) => s.calls[q]);
  const who = `${RECORDS.toLocaleString('en-US')} records, a second process writing as many`;
  row(
    `event-loop delay p50 / p99 / p99.9 (${who})`,
    `recordAsync ${['p50', 'p99', 'p999'].map((q) => formatNs(delay('async', q))).join(' / ')}`,
    `record ${['p50', 'p99', 'p999'].map((q) => formatNs(delay('sync', q))).join(' / ')}`,
    `p99 ${(delay('sync', 'p99') / Math.max(delay('async', 'p99'), 1)).toFixed(1)}× shorter`,
    'p99 ≤ 1 ms',
    delay('async', 'p99') <= 1e6,
  );
  row(
    'event-loop delay p50 / p99 / p99.9 / worst of an idle loop, the second process writing (the floor)',
    `idle ${['p50', 'p99', 'p999', 'worst'].map((q) => formatNs(delay('idle', q))).join(' / ')}`,
    '—',
    '—',
    '—',
    null,
  );
  row(
    `event-loop delay, worst (${who})`,
    `recordAsync ${formatNs(delay('async', 'worst'))} (all rounds: ${formatNs(Math.max(...stall.async.map((s) => s.loopDelay.worst)))})`,
    `record ${formatNs(delay('sync', 'worst'))} (all rounds: ${formatNs(Math.max(...stall.sync.map((s) => s.loopDelay.worst)))})`,
    `${(delay('sync', 'worst') / Math.max(delay('async', 'worst'), 1)).toFixed(1)}× shorter`,
    '≤ 5 ms',
    delay('async', 'worst') <= 5e6,
  );
  row(
    `time one call holds the JS thread, p50 / p99 / p99.9 / worst (${who})`,
    `recordAsync ${['p50', 'p99', 'p999', 'worst'].map((q) => formatNs(call('async', q))).join(' / ')}`,
    `record ${['p50', 'p99', 'p999', 'worst'].map((q) => formatNs(call('sync', q))).join(' / ')}`,
    `p99 ${(call('sync', 'p99') / call('async', 'p99')).toFixed(1)}× shorter`,
    '—',
    null,
  );
  const cpuAsync = med(thread.async, (s) => s.threadCpuPerRecord ?? NaN);
  const cpuLoop = med(thread.loop, (s) => s.threadCpuPerRecord ?? NaN);
  row(
    'JS-thread CPU time per record, 64 in flight (settling included)',
    `recordAsync ${formatNs(cpuAsync)} (submit loop alone: ${formatNs(med(thread.async, (s) => s.submitPerCall))} per call; the benchmark's own loop: ${formatNs(cpuLoop)})`,
    `record ${formatNs(med(thread.sync, (s) => s.threadCpuPerRecord ?? NaN))}`,
    '—',
    '≤ 10 µs',
    Number.isFinite(cpuAsync) ? cpuAsync <= 10e3 : null,
  );
  const sync = rate.sync;
  for (const k of IN_FLIGHT) {
    const ratio = median(rate[k].map((x, i) => x / sync[i]));
    row(
      `throughput, ${k} recordAsync in flight`,
      `${Math.round(median(rate[k])).toLocaleString('en-US')}/s`,
      `record ${Math.round(median(sync)).toLocaleString('en-US')}/s`,
      `${ratio.toFixed(2)}× the sync rate`,
      k === 64 ? '≥ 4×' : '—',
      k === 64 ? ratio >= 4 : null,
    );
  }
  return out;
}

function printTable(list) {
  const head = ['Operation', 'Promise API (median)', 'Synchronous API (median)', 'Ratio', 'Target', 'Met'];
  const cols = ['operation', 'addon', 'reference', 'ratio', 'target', 'met'];
  const lines = [head, head.map(() => '---'), ...list.map((r) => cols.map((c) => String(r[c])))];
  return lines.map((l) => `| ${l.join(' | ')} |`).join('\n');
}

async function main() {
  const jsonAt = process.argv.indexOf('--json');
  console.log(
    `Promise API: ${ROUNDS} rounds, ${RECORDS} records per stall round (${WINDOW} in flight), ${THREAD_RECORDS} per CPU-time round, ${RATE_RECORDS} per throughput round; load average ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}`,
  );
  const result = await measureAsync();
  console.log(`\n${printTable(result.rows)}\n`);
  if (jsonAt > 0) fs.writeFileSync(process.argv[jsonAt + 1], JSON.stringify(result, null, 2));
}

module.exports = { input, measureAsync, printTable };

if (require.main === module) {
  if (process.argv[2] === 'writer') writerRole();
  else {
    main().catch((err) => {
      console.error(err);
      process.exit(1);
    });
  }
}
