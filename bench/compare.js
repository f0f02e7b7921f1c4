'use strict';
// `node bench/compare.js <other checkout>`: this checkout's addon against another build of the
// package (an earlier commit, built), on bench/workloads.js, in one run. One child process per
// build; each workload's rounds alternate between them (who goes first rotates), so both see
// the same machine load. Prints, per workload, each build's median and the median of the
// per-round ratios (other / this: above 1 means this checkout is faster).

const { fork } = require('node:child_process');
const path = require('node:path');
const { WORKLOADS } = require('./workloads');

const ROUNDS = Number(process.env.BENCH_ROUNDS) || 25;
const ONE_SHOT_ROUNDS = Number(process.env.BENCH_ONE_SHOT_ROUNDS) || 7;
const ONLY = process.env.BENCH_ONLY ? new RegExp(process.env.BENCH_ONLY) : null;

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

function formatNs(ns) {
  if (ns < 1e3) return `${ns.toFixed(0)} ns`;
  if (ns < 1e6) return `${(ns / 1e3).toFixed(2)} µs`;
  if (ns < 1e9) return `${(ns / 1e6).toFixed(2)} ms`;
  return `${(ns / 1e9).toFixed(2)} s`;
}

function start(root) {
  const child = fork(path.join(__dirname, 'child.js'), ['addon'], {
    env: { ...process.env, SESSION_AWARENESS_BENCH_ROOT: root },
  });
  let waiting = null;
  child.on('message', (msg) => {
    const w = waiting;
    waiting = null;
    if (msg.ok) w.resolve(msg);
    else w.reject(new Error(`${root}: ${msg.error}`));
  });
  child.on('exit', (code) => {
    if (waiting) waiting.reject(new Error(`${root}: exited with ${code}`));
  });
  return {
    ask: (msg) =>
      new Promise((resolve, reject) => {
        waiting = { resolve, reject };
        child.send(msg);
      }),
    stop: () => child.send({ cmd: 'exit' }),
  };
}

async function main() {
  const other = process.argv[2];
  if (!other) {
    console.error('usage: node bench/compare.js <other checkout, built>');
    process.exit(2);
  }
  const builds = [
    ['this', start(path.join(__dirname, '..'))],
    ['other', start(path.resolve(other))],
  ];
  const rows = [];
  try {
    for (const [index, w] of WORKLOADS.entries()) {
      if (ONLY && !ONLY.test(w.name)) continue;
      for (const [, b] of builds) await b.ask({ cmd: 'setup', index });
      const s = { this: [], other: [] };
      const rounds = w.oneShot ? ONE_SHOT_ROUNDS : ROUNDS + 1;
      for (let r = 0; r < rounds; r++) {
        for (let k = 0; k < builds.length; k++) {
          const [name, b] = builds[(r + k) % builds.length];
          const reply = await b.ask({ cmd: 'round', index });
          if (w.oneShot || r > 0) s[name].push(reply.ns);
        }
      }
      const ratio = median(s.other.map((x, i) => x / s.this[i]));
      rows.push([w.name, formatNs(median(s.other)), formatNs(median(s.this)), `${ratio.toFixed(2)}×`]);
      console.error(`  ${w.name}: before ${rows.at(-1)[1]}, after ${rows.at(-1)[2]} (${rows.at(-1)[3]})`);
    }
  } finally {
    for (const [, b] of builds) b.stop();
  }
  console.log(`| workload | ${path.basename(path.resolve(other))} | this checkout | ratio |`);
  console.log('| --- | --- | --- | --- |');
  for (const r of rows) console.log(`| ${r.join(' | ')} |`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
