'use strict';
// `npm run bench`: the addon, the reference (bench/reference/) and the raw SQLite limit
// (crates/core/benches/raw_record.rs) on the same workloads, in one run.
//
// 1. The behaviour check (bench/check-behaviour.js) runs on both implementations first.
// 2. One process per implementation (bench/child.js) and the raw benchmark in its `--serve`
//    mode are started; each workload's rounds are interleaved between them, so every
//    implementation sees the same machine load. Medians of the rounds are reported.
// 3. RSS is measured in a fresh process per implementation (bench/rss.js).
// 4. Beside them, OpenClaw's published implementation (bench/openclaw/, on Node 24) and the
//    addon again on Node 24, in the same rounds: see bench/openclaw/harness.js.
// 5. The Promise API against the synchronous one (bench/async.js, in a process of its own):
//    its rows close the first table.
// 6. What the metrics cost (bench/metrics.js, in a process of its own): record and
//    recordAsync with no MeterProvider and with the OpenTelemetry SDK's; printed on its own.
// It prints two tables (Markdown) and writes the raw samples to .tmp/bench-results.json.

const { execFileSync, spawn } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const readline = require('node:readline');
const { checkBehaviour } = require('./check-behaviour');
const { WORKLOADS } = require('./workloads');
const openclaw = require('./openclaw/harness');
const { startChild } = require('./start-child');

const ROOT = path.join(__dirname, '..');
const ROUNDS = Number(process.env.BENCH_ROUNDS) || 25;
const ONE_SHOT_ROUNDS = Number(process.env.BENCH_ONE_SHOT_ROUNDS) || 7;
// BENCH_ONLY=<regex>: only the workloads whose name matches (no table; for profiling work).
const ONLY = process.env.BENCH_ONLY ? new RegExp(process.env.BENCH_ONLY) : null;
const RAW_INDEX = {
  'record notify, 1 watcher': 0,
  'record notify, 100 watchers': 1,
  'record log-only': 2,
};

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

function formatNs(ns) {
  if (ns < 1e3) return `${ns.toFixed(0)} ns`;
  if (ns < 1e6) return `${(ns / 1e3).toFixed(ns < 1e4 ? 2 : 1)} µs`;
  if (ns < 1e9) return `${(ns / 1e6).toFixed(ns < 1e7 ? 2 : 1)} ms`;
  return `${(ns / 1e9).toFixed(2)} s`;
}

function machine() {
  const cpu = (fs.readFileSync('/proc/cpuinfo', 'utf8').match(/model name\s*:\s*(.*)/) || [])[1];
  let rustc = 'unknown';
  try {
    rustc = execFileSync('rustc', ['--version'], { cwd: ROOT }).toString().trim();
  } catch {
    // Only informative.
  }
  return {
    cpu: cpu || os.cpus()[0].model,
    cores: os.cpus().length,
    memoryGiB: Math.round(os.totalmem() / 2 ** 30),
    kernel: os.release(),
    node: process.version,
    rustc,
    loadAverage: os.loadavg().map((x) => x.toFixed(2)).join(' '),
  };
}

/** The raw benchmark in `--serve` mode: one line in, one sample out. */
async function startRaw() {
  const proc = spawn(
    'cargo',
    [
      'bench',
      '-q',
      '-p',
      'session-awareness-core',
      '--features',
      'test-hooks',
      '--bench',
      'raw_record',
      '--',
      '--serve',
    ],
    { cwd: ROOT, stdio: ['pipe', 'pipe', 'inherit'] },
  );
  const lines = readline.createInterface({ input: proc.stdout })[Symbol.asyncIterator]();
  const next = async () => {
    const { value, done } = await lines.next();
    if (done) throw new Error('the raw benchmark exited');
    return value;
  };
  if ((await next()) !== 'ready') throw new Error('the raw benchmark did not start');
  return {
    async round(index, mode, ops) {
      proc.stdin.write(`${index} ${mode} ${ops}\n`);
      return Number(await next());
    },
    stop() {
      proc.stdin.end();
    },
  };
}

async function behaviourChecks(harness) {
  const { SessionState } = require('..');
  const { ReferenceSessionState } = require('./reference/session-state');
  for (const [name, Impl] of [
    ['addon', SessionState],
    ['reference', ReferenceSessionState],
  ]) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), `session-awareness-check-${name}-`));
    try {
      const checks = await checkBehaviour((file, options) => new Impl(file, options), dir);
      console.log(`behaviour check, ${name}: ${checks.length} checks passed`);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }
  if (harness) console.log(openclaw.checkBehaviour(harness));
}

async function measure(harness) {
  const addon = startChild('addon');
  const reference = startChild('reference');
  const side = harness ? await openclaw.start(harness, startChild) : null;
  console.log('starting the raw SQLite benchmark (cargo bench; the first run compiles it)…');
  const raw = await startRaw();
  const samples = {};
  try {
    for (const [index, w] of WORKLOADS.entries()) {
      if (ONLY && !ONLY.test(w.name)) continue;
      const s = { addon: [], reference: [], baseline: [], rawHot: [], rawBackground: [], core: [] };
      const runners = [
        ['addon', async () => addon.ask({ cmd: 'round', index })],
        ['reference', async () => reference.ask({ cmd: 'round', index })],
      ];
      const compared = side !== null && side.has(w.name);
      if (compared) {
        s.addon24 = [];
        s.openclaw = [];
        runners.push(['addon24', async () => side.addon24.ask({ cmd: 'round', index })]);
        runners.push(['openclaw', async () => side.openclaw.ask({ cmd: 'round', name: w.name })]);
      }
      if (w.name in RAW_INDEX) {
        for (const [name, mode] of [
          ['rawBackground', 'bg'],
          ['rawHot', 'hot'],
          ['core', 'core'],
        ]) {
          runners.push([name, async () => ({ ns: await raw.round(RAW_INDEX[w.name], mode, w.ops) })]);
        }
      }
      await addon.ask({ cmd: 'setup', index });
      await reference.ask({ cmd: 'setup', index });
      if (compared) {
        await side.addon24.ask({ cmd: 'setup', index });
        await side.openclaw.ask({ cmd: 'setup', name: w.name });
      }
      const rounds = w.oneShot ? ONE_SHOT_ROUNDS : ROUNDS + 1;
      for (let r = 0; r < rounds; r++) {
        // The first round of a per-operation workload only warms up. Each round rotates who
        // goes first, so no implementation always runs right after another one.
        const keep = w.oneShot || r > 0;
        for (let k = 0; k < runners.length; k++) {
          const [name, run] = runners[(r + k) % runners.length];
          if (compared && (name === 'addon24' || name === 'openclaw') && r >= side.rounds(w.name) + (w.oneShot ? 0 : 1)) continue;
          const reply = await run();
          if (!keep) continue;
          s[name].push(reply.ns);
          if (reply.baseline !== undefined && name === 'addon') s.baseline.push(reply.baseline);
        }
      }
      samples[w.name] = s;
      let shown = ['addon', 'reference'].map((name) => `${name} ${formatNs(median(s[name]))}`).join(', ');
      if (s.rawHot.length > 0) {
        shown += `, raw ${formatNs(median(s.rawBackground))} (checkpoint on the hot path ${formatNs(median(s.rawHot))}), core without the binding ${formatNs(median(s.core))}`;
      }
      if (s.baseline.length > 0) shown += `, empty napi call ${formatNs(median(s.baseline))}`;
      if (compared) {
        shown += `; Node 24: OpenClaw ${formatNs(median(s.openclaw))}, addon ${formatNs(median(s.addon24))} (${pairedRatio(s.openclaw, s.addon24).toFixed(2)}×)`;
      }
      console.log(`  ${w.name}: ${shown}`);
    }
  } finally {
    addon.stop();
    reference.stop();
    raw.stop();
    side?.stop();
  }
  for (const impl of ['addon', 'reference']) {
    if (ONLY && !ONLY.test('rss')) break;
    const out = execFileSync(process.execPath, ['--expose-gc', path.join(__dirname, 'rss.js'), impl]);
    samples[`rss ${impl}`] = JSON.parse(out.toString());
    console.log(`  rss ${impl}: ${samples[`rss ${impl}`].rss.toFixed(1)} MiB`);
  }
  if (harness && !(ONLY && !ONLY.test('rss'))) Object.assign(samples, openclaw.measureRss(harness));
  if (!ONLY || ONLY.test('async')) samples.async = measurePromiseApi();
  if (!ONLY || ONLY.test('metrics')) samples.metrics = measureMetrics();
  return samples;
}

/** bench/metrics.js in a fresh process: its samples and table. */
function measureMetrics() {
  const out = path.join(ROOT, '.tmp', 'bench-metrics.json');
  fs.mkdirSync(path.dirname(out), { recursive: true });
  execFileSync(process.execPath, [path.join(__dirname, 'metrics.js'), '--json', out], { stdio: 'inherit' });
  return JSON.parse(fs.readFileSync(out, 'utf8'));
}

/** bench/async.js in a fresh process: its samples and table rows. */
function measurePromiseApi() {
  const out = path.join(ROOT, '.tmp', 'bench-async.json');
  fs.mkdirSync(path.dirname(out), { recursive: true });
  execFileSync(process.execPath, [path.join(__dirname, 'async.js'), '--json', out], { stdio: 'inherit' });
  return JSON.parse(fs.readFileSync(out, 'utf8'));
}

/** The median of the per-round ratios a[i] / b[i]: rounds i ran back to back, so each ratio
 * compares two measurements taken under the same machine load. */
function pairedRatio(a, b) {
  return median(a.map((x, i) => x / b[i]));
}

function table(samples) {
  const rows = [];
  const row = (operation, addon, reference, ratio, target, met) =>
    rows.push({ operation, addon, reference, ratio, target, met: met === null ? '—' : met ? 'yes' : 'NO' });
  const rate = (ns) => `${Math.round(1e9 / ns).toLocaleString('en-US')}/s`;
  for (const name of Object.keys(RAW_INDEX)) {
    const s = samples[name];
    const a = median(s.addon);
    const speedup = pairedRatio(s.reference, s.addon);
    const ofRaw = pairedRatio(s.addon, s.rawBackground);
    row(name, `${formatNs(a)} (${rate(a)})`, `${formatNs(median(s.reference))} (${rate(median(s.reference))})`, `${speedup.toFixed(2)}× the reference's rate`, '≥ 2.5×', speedup >= 2.5);
    row(
      `${name}: the addon against raw SQL, checkpoint in the background`,
      formatNs(a),
      `raw ${formatNs(median(s.rawBackground))} (checkpoint on the hot path: ${formatNs(median(s.rawHot))}; the core's Store::record without the binding: ${formatNs(median(s.core))}, ${pairedRatio(s.core, s.rawBackground).toFixed(2)}× raw)`,
      `${ofRaw.toFixed(2)}× raw`,
      '≤ 1.25× raw',
      ofRaw <= 1.25,
    );
  }
  const pair = (name, label, target, goal) => {
    const s = samples[name];
    const speedup = pairedRatio(s.reference, s.addon);
    row(label || name, formatNs(median(s.addon)), formatNs(median(s.reference)), `${speedup.toFixed(2)}× faster`, target, goal ? speedup >= goal : null);
  };
  pair('changesSince of 200 events', null, '≥ 2×', 2);
  pair('stateVersions of 500 keys', null, '—', null);
  {
    const s = samples['drain, nothing pending'];
    const ofNoop = pairedRatio(s.addon, s.baseline);
    row('drain, nothing pending', formatNs(median(s.addon)), formatNs(median(s.reference)), `${pairedRatio(s.reference, s.addon).toFixed(2)}× faster`, '—', null);
    row('drain, nothing pending, against an empty napi call', formatNs(median(s.addon)), `isClosed ${formatNs(median(s.baseline))}`, `${ofNoop.toFixed(2)}× the empty call`, '≤ 1.5×', ofNoop <= 1.5);
  }
  pair('drain of 1 pending notice', null, '—', null);
  pair('sweep over 10,000 cursors', null, '—', null);
  pair('sweep over 100,000 cursors', null, '≥ 3×', 3);
  pair('prune 60,000 -> 50,000 rows (total)', 'prune 60,000 → 50,000 rows, total', '—', null);
  {
    const s = samples['prune 60,000 -> 50,000 rows (longest JS stall)'];
    const a = Math.max(...s.addon);
    const r = Math.max(...s.reference);
    row('prune 60,000 → 50,000 rows, longest JS stall of all rounds (automatic prune)', formatNs(a), formatNs(r), `${(r / a).toFixed(1)}× shorter`, '≤ 20 ms', a <= 20e6);
  }
  pair('open a database of 50,000 events', null, '—', null);
  {
    const a = samples['rss addon'];
    const r = samples['rss reference'];
    row(
      'RSS at 100,000 cursors and 100,000 pending notices (growth over the open store)',
      `${a.rss.toFixed(1)} MiB (+${(a.rss - a.baseline).toFixed(1)})`,
      `${r.rss.toFixed(1)} MiB (+${(r.rss - r.baseline).toFixed(1)})`,
      `${(r.rss / a.rss).toFixed(2)}× smaller`,
      '≤ 64 MiB',
      a.rss <= 64,
    );
  }
  if (samples.async) rows.push(...samples.async.rows);
  return rows;
}

function printTable(rows, cols = ['operation', 'addon', 'reference', 'ratio', 'target', 'met'], head = ['Operation', 'Addon (median)', 'Reference or baseline (median)', 'Ratio', 'Target', 'Met']) {
  const lines = [head, head.map(() => '---'), ...rows.map((r) => cols.map((c) => String(r[c])))];
  return lines.map((l) => `| ${l.join(' | ')} |`).join('\n');
}

async function main() {
  const info = machine();
  console.log(`${info.cpu}, ${info.cores} cores, ${info.memoryGiB} GiB, Linux ${info.kernel}`);
  console.log(`Node ${info.node}, ${info.rustc}, load average ${info.loadAverage}`);
  const harness = openclaw.harness(ROOT);
  if (!ONLY) await behaviourChecks(harness);
  const samples = await measure(harness);
  if (ONLY) return;
  const rows = table(samples);
  let text = printTable(rows);
  console.log(`\n${text}\n`);
  if (harness) {
    const against = printTable(...openclaw.table(samples, { median, pairedRatio, formatNs }));
    console.log(`Against OpenClaw ${openclaw.VERSION}, both on Node ${harness.nodeVersion}:\n\n${against}\n`);
    text += `\n\n${against}`;
  }
  console.log(`${ROUNDS} rounds per operation-rate workload (after one warm-up), ${ONE_SHOT_ROUNDS} per one-shot workload; ratios are medians of per-round ratios; load average at the end ${machine().loadAverage}`);
  fs.mkdirSync(path.join(ROOT, '.tmp'), { recursive: true });
  fs.writeFileSync(
    path.join(ROOT, '.tmp', 'bench-results.json'),
    JSON.stringify({ machine: info, rounds: { ROUNDS, ONE_SHOT_ROUNDS }, samples, table: text }, null, 2),
  );
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
