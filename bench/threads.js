'use strict';
// `node bench/threads.js [build root]... [--rounds 20] [--targets 200]`: what each thread of the
// process does during a restart sweep of targets × 100 pending cursors, per build, in
// interleaved rounds (a fresh copy of one template file each round, opened before the clock
// starts). Per build: the sweep's wall time, the JS thread's own CPU time and run-queue wait
// (/proc/self/task/<tid>/schedstat: the kernel's per-thread clocks, so other processes' load
// shows as wait, not as CPU), its voluntary and involuntary context switches, and the CPU time
// and wake-ups of every other thread that ran during the sweep. Medians of the rounds.
// Without a root, this checkout. Only Linux.

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFileSync } = require('node:child_process');

const arg = (name, fallback) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];

/** One thread's clocks and switches. */
function threads() {
  const out = new Map();
  for (const tid of fs.readdirSync('/proc/self/task')) {
    try {
      const [run, wait] = fs.readFileSync(`/proc/self/task/${tid}/schedstat`, 'utf8').split(' ').map(Number);
      const status = fs.readFileSync(`/proc/self/task/${tid}/status`, 'utf8');
      const count = (name) => Number(new RegExp(`\\n${name}:\\s+(\\d+)`).exec(status)[1]);
      out.set(tid, { run, wait, v: count('voluntary_ctxt_switches'), nv: count('nonvoluntary_ctxt_switches') });
    } catch {
      // The thread ended meanwhile.
    }
  }
  return out;
}

/** In a child process: `rounds` sweeps of one build; one JSON line per round. */
function child(root, rounds, targets) {
  const { SessionState } = require(root);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'session-awareness-threads-'));
  const open = (file) => new SessionState(file, { wake: () => {}, onError: (e) => { throw e; } });
  const template = path.join(dir, 'template.sqlite');
  const s = open(template);
  const watchers = Array.from({ length: 100 }, (_, i) => `agent:w${i}:main`);
  for (let t = 0; t < targets; t++) {
    s.record({ kind: 'human_direct_message', actorType: 'human', actorId: 'telegram:42', summary: 'm', sessionKey: `agent:main:subagent:t${t}`, watchers });
  }
  s.close();
  const file = path.join(dir, 'sweep.sqlite');
  for (let r = 0; r < rounds; r++) {
    for (const suffix of ['-wal', '-shm', '']) fs.rmSync(file + suffix, { force: true });
    fs.copyFileSync(template, file);
    if (fs.existsSync(`${template}-wal`)) fs.copyFileSync(`${template}-wal`, `${file}-wal`);
    const store = open(file);
    const before = threads();
    const t0 = process.hrtime.bigint();
    const report = store.sweep();
    const ns = Number(process.hrtime.bigint() - t0);
    const after = threads();
    store.close();
    if (report.notices !== targets * 100) throw new Error(`sweep: ${report.notices} notices`);
    const js = String(process.pid);
    const d = (tid, k) => after.get(tid)[k] - (before.get(tid)?.[k] ?? 0);
    let otherCpu = 0;
    let otherWakes = 0;
    let others = 0;
    for (const tid of after.keys()) {
      if (tid === js || (d(tid, 'run') === 0 && d(tid, 'v') === 0)) continue;
      others += 1;
      otherCpu += d(tid, 'run');
      otherWakes += d(tid, 'v');
    }
    console.log(JSON.stringify({ ns, cpu: d(js, 'run'), wait: d(js, 'wait'), v: d(js, 'v'), nv: d(js, 'nv'), others, otherCpu, otherWakes }));
  }
  fs.rmSync(dir, { recursive: true, force: true });
}

function main() {
  const roots = process.argv.slice(2).filter((a, i, all) => !a.startsWith('--') && !all[i - 1]?.startsWith('--'));
  const builds = (roots.length ? roots : [path.join(__dirname, '..')]).map((r) => path.resolve(r));
  const rounds = arg('--rounds', 20);
  const targets = arg('--targets', 200);
  const samples = new Map(builds.map((b) => [b, []]));
  // Five rounds per child, the builds in rotating order, so all see the same load.
  for (let k = 0; k < Math.ceil(rounds / 5); k++) {
    for (let i = 0; i < builds.length; i++) {
      const b = builds[(k + i) % builds.length];
      const out = execFileSync(process.execPath, [__filename, '--child', b, '--rounds', '5', '--targets', String(targets)]);
      samples.get(b).push(...out.toString().trim().split('\n').map((l) => JSON.parse(l)));
    }
  }
  const ms = (ns) => (ns / 1e6).toFixed(1);
  console.log(`${targets * 100} pending cursors, ${rounds} rounds per build; load average ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}`);
  console.log('| build | sweep (ms) | JS thread CPU (ms) | JS thread run-queue wait (ms) | JS thread switches (vol. / invol.) | other threads that ran | their CPU (ms) | their wake-ups |');
  console.log('| --- | --- | --- | --- | --- | --- | --- | --- |');
  for (const [b, s] of samples) {
    const m = (k) => median(s.map((x) => x[k]));
    console.log(`| ${path.basename(b)} | ${ms(m('ns'))} | ${ms(m('cpu'))} | ${ms(m('wait'))} | ${m('v')} / ${m('nv')} | ${m('others')} | ${ms(m('otherCpu'))} | ${m('otherWakes')} |`);
  }
}

if (process.argv[2] === '--child') child(process.argv[3], arg('--rounds', 5), arg('--targets', 200));
else main();
