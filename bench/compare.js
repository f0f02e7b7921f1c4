'use strict';
// `node bench/compare.js <other checkout>... [reference]`: this checkout's addon against other
// builds of the package (earlier commits, built), and with `reference` against the plain-JS
// reference (bench/reference/), on bench/workloads.js, in one run. One child process per
// build; each workload's rounds rotate through them (who goes first rotates), so all see the
// same machine load. Prints, per workload and other build, the two medians and the median of
// the per-round ratios (other / this: above 1 means this checkout is faster). Build the other
// checkouts as this one (`npm run build`): a plain `cargo build` compiles the bundled SQLite
// with the machine's compiler instead of the glibc 2.17 toolchain's, which alone moves the
// record rows by several percent (BENCHMARKS.md, "The record that opens 100 notices").

const path = require('node:path');
const { startChild } = require('./start-child');
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

/** The addon of the checkout at `root` (or the reference), in a child process. */
function start(root) {
  if (root === 'reference') return startChild('reference');
  return startChild('addon', { env: { ...process.env, SESSION_AWARENESS_BENCH_ROOT: root } }, undefined, root);
}

async function main() {
  const others = process.argv.slice(2);
  if (others.length === 0) {
    console.error('usage: node bench/compare.js <other checkout, built>... [reference]');
    process.exit(2);
  }
  const name = (o) => (o === 'reference' ? 'reference' : path.basename(path.resolve(o)));
  const builds = [
    ['this', start(path.join(__dirname, '..'))],
    ...others.map((o) => [name(o), start(o === 'reference' ? o : path.resolve(o))]),
  ];
  const rows = [];
  try {
    for (const [index, w] of WORKLOADS.entries()) {
      if (ONLY && !ONLY.test(w.name)) continue;
      for (const [, b] of builds) await b.ask({ cmd: 'setup', index });
      const s = Object.fromEntries(builds.map(([n]) => [n, []]));
      const rounds = w.oneShot ? ONE_SHOT_ROUNDS : ROUNDS + 1;
      for (let r = 0; r < rounds; r++) {
        for (let k = 0; k < builds.length; k++) {
          const [name, b] = builds[(r + k) % builds.length];
          const reply = await b.ask({ cmd: 'round', index });
          if (w.oneShot || r > 0) s[name].push(reply.ns);
        }
      }
      for (const o of others.map(name)) {
        const ratio = median(s[o].map((x, i) => x / s.this[i]));
        rows.push([w.name, o, formatNs(median(s[o])), formatNs(median(s.this)), `${ratio.toFixed(2)}×`]);
        console.error(`  ${w.name}: ${o} ${rows.at(-1)[2]}, this ${rows.at(-1)[3]} (${rows.at(-1)[4]})`);
      }
    }
  } finally {
    for (const [, b] of builds) b.stop();
  }
  console.log(`load average at the end: ${require('node:os').loadavg().map((x) => x.toFixed(2)).join(' ')}`);
  console.log('| workload | other build | other | this checkout | ratio (other / this) |');
  console.log('| --- | --- | --- | --- | --- |');
  for (const r of rows) console.log(`| ${r.join(' | ')} |`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
