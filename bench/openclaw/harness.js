'use strict';
// The OpenClaw column of `npm run bench`: OpenClaw's published implementation
// (bench/openclaw/child.mjs) and the addon again (bench/child.js), both on Node 24, timed in
// the same rounds as the addon and the reference, so the ratio compares like with like.
//
// OpenClaw is set up by scripts/openclaw.sh: once (about a minute and 400 MB in .tmp/, from the
// npm registry), cached after. Where that cannot be done (no network, not Linux x86-64) or
// BENCH_OPENCLAW=0, the column is skipped with one line and the rest of the run goes on.

const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

/** The OpenClaw version scripts/openclaw.sh installs. */
const VERSION = '2026.9.6';
/** The ratio the addon is held to against OpenClaw. */
const TARGET = 5;
const LOG = path.join(__dirname, '..', '..', '.tmp', 'bench-openclaw.log');

/** Where OpenClaw and Node 24 are, or null (with the reason printed) where the column is skipped. */
function harness(root) {
  if (process.env.BENCH_OPENCLAW === '0') {
    console.log('OpenClaw column skipped: BENCH_OPENCLAW=0');
    return null;
  }
  let out;
  try {
    out = execFileSync('bash', [path.join(root, 'scripts', 'openclaw.sh')], {
      cwd: root,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  } catch (err) {
    const why = String(err.stderr || err.message).trim().split('\n').pop();
    console.log(`OpenClaw column skipped: scripts/openclaw.sh failed (${why})`);
    return null;
  }
  const node24 = (/^node24=(.*)$/m.exec(out) || [])[1];
  if (!node24 || !fs.existsSync(node24)) {
    console.log('OpenClaw column skipped: no Node 24 binary (scripts/node24.sh runs on Linux x86-64 only)');
    return null;
  }
  const nodeVersion = execFileSync(node24, ['-p', 'process.versions.node'], { encoding: 'utf8' }).trim();
  fs.mkdirSync(path.dirname(LOG), { recursive: true });
  fs.writeFileSync(LOG, '');
  return { node24, nodeVersion };
}

/** Runs bench/openclaw/check.mjs; returns its summary line, throws on a difference. */
function checkBehaviour(h) {
  const out = execFileSync(h.node24, [path.join(__dirname, 'check.mjs')], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', fs.openSync(LOG, 'a')],
  });
  return out.trim().split('\n').pop();
}

/**
 * Starts the two Node 24 processes. OpenClaw logs slow-operation warnings to its output; they
 * go to .tmp/bench-openclaw.log, not into the tables.
 * @returns {Promise<{ addon24, openclaw, has(name: string): boolean, rounds(name: string): number, stop(): void }>}
 */
async function start(h, startChild) {
  const log = fs.openSync(LOG, 'a');
  const stdio = ['ignore', log, log, 'ipc'];
  const addon24 = startChild('addon', { execPath: h.node24, stdio });
  const openclaw = startChild('openclaw', { execPath: h.node24, stdio }, path.join(__dirname, 'child.mjs'));
  const { workloads } = await openclaw.ask({ cmd: 'names' });
  const rounds = new Map(workloads.map((w) => [w.name, w.rounds ?? Infinity]));
  return {
    addon24,
    openclaw,
    has: (name) => rounds.has(name),
    /** How many of a workload's rounds the two Node 24 processes take part in. */
    rounds: (name) => rounds.get(name),
    stop() {
      addon24.stop();
      openclaw.stop();
    },
  };
}

/** RSS at 100,000 cursors: the addon (bench/rss.js) and OpenClaw (bench/openclaw/rss.mjs), each
 * in a fresh Node 24 process. */
function measureRss(h) {
  const samples = {};
  for (const [key, script, args] of [
    ['rss addon24', path.join(__dirname, '..', 'rss.js'), ['addon']],
    ['rss openclaw', path.join(__dirname, 'rss.mjs'), []],
  ]) {
    const out = execFileSync(h.node24, ['--expose-gc', script, ...args], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', fs.openSync(LOG, 'a')],
    });
    samples[key] = JSON.parse(out.trim().split('\n').pop());
    console.log(`  ${key}: ${samples[key].rss.toFixed(1)} MiB`);
  }
  return samples;
}

/** The rows of the OpenClaw table, and its columns and headings for run.js's printTable. */
function table(samples, { median, pairedRatio, formatNs }) {
  const rows = [];
  const met = (ratio) => (ratio >= TARGET ? 'yes' : 'NO');
  for (const [name, label] of [
    ['record notify, 1 watcher', 'record, notify kind, 1 watcher'],
    ['record log-only', 'record, log-only kind'],
    ['changesSince of 200 events', 'changesSince, 200 events'],
    ['stateVersions of 500 keys', 'stateVersions, 500 keys'],
    ['drain of 1 pending notice', 'drain of one notice (OpenClaw: take + acknowledge)'],
    ['sweep over 10,000 cursors', 'sweep, 10,000 pending cursors'],
    ['sweep over 100,000 cursors', 'sweep, 100,000 pending cursors'],
    ['prune 60,000 -> 50,000 rows (total)', 'prune 60,000 → 50,000 events'],
  ]) {
    const s = samples[name];
    if (!s || !s.openclaw) continue;
    const ratio = pairedRatio(s.openclaw, s.addon24);
    rows.push({ operation: label, openclaw: formatNs(median(s.openclaw)), addon: formatNs(median(s.addon24)), ratio: `${ratio.toFixed(2)}×`, target: `≥ ${TARGET}×`, met: met(ratio) });
  }
  const a = samples['rss addon24'];
  const o = samples['rss openclaw'];
  if (a && o) {
    const ratio = o.rss / a.rss;
    rows.push({
      operation: 'RSS at 100,000 cursors (growth over the open, empty store)',
      openclaw: `${o.rss.toFixed(1)} MiB (+${(o.rss - o.baseline).toFixed(1)})`,
      addon: `${a.rss.toFixed(1)} MiB (+${(a.rss - a.baseline).toFixed(1)})`,
      ratio: `${ratio.toFixed(2)}× smaller`,
      target: `≥ ${TARGET}×`,
      met: met(ratio),
    });
  }
  return [
    rows,
    ['operation', 'openclaw', 'addon', 'ratio', 'target', 'met'],
    ['Operation', 'OpenClaw (median)', 'Addon on Node 24 (median)', 'Ratio (OpenClaw / addon)', 'Target', 'Met'],
  ];
}

module.exports = { VERSION, harness, checkBehaviour, start, measureRss, table };
