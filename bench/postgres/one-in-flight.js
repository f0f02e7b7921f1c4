'use strict';
// `node bench/postgres/one-in-flight.js [--rounds 7] [--records 300] [--no-fsync]`: the PostgreSQL store at
// 1 record in flight against the node-postgres baseline (bench/postgres/baseline.js) on one
// throwaway cluster (fsync on), in one session and over 64, the two alternating who goes first
// in each round. Prints every round's rates and ratio, then the median, lowest and highest
// ratio per case: the "≥ 1.0× in every run" question needs the spread, not only the median.
// `--no-fsync` starts the cluster with fsync off, which takes the disk's flush out of both sides
// and leaves what each spends per record on its own.

const os = require('node:os');
const { Pool } = require('pg');
const { SessionState } = require('../..');
const { startCluster } = require('../../scripts/pg/cluster');
const { applySchema } = require('../../scripts/pg/schema');
const { baseline } = require('./baseline');
const { humanMessage } = require('../messages');

const arg = (name, fallback) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
const input = (sessionKey, n) => humanMessage(sessionKey, n, ['agent:main:main']);

async function main() {
  const rounds = arg('--rounds', 7);
  const records = arg('--records', 300);
  const cluster = await startCluster({ name: 'bench-one', durable: !process.argv.includes('--no-fsync') });
  const pool = new Pool({ connectionString: cluster.url, max: 10 });
  pool.on('error', () => {}); // a client dropped at the cluster's stop
  let store = null;
  try {
    store = await SessionState.open(cluster.url, { wake: () => {}, onError: (e) => console.error(e) });
    const setup = await pool.connect();
    await applySchema(setup, 'sa_baseline');
    setup.release();
    const base = baseline(pool, 'sa_baseline');
    const sides = { store: (x) => store.recordAsync(x), baseline: (x) => base.record(x) };
    for (let i = 0; i < 50; i++) {
      await sides.store(input('agent:main:subagent:warm', i));
      await sides.baseline(input('agent:main:subagent:warm', i));
    }
    const ratios = { 1: [], 64: [] };
    const us = { 1: { store: [], baseline: [] }, 64: { store: [], baseline: [] } };
    for (let r = 0; r < rounds; r++) {
      for (const sessions of [1, 64]) {
        const rate = {};
        for (const name of r % 2 ? ['baseline', 'store'] : ['store', 'baseline']) {
          const t0 = process.hrtime.bigint();
          for (let n = 0; n < records; n++) await sides[name](input(`agent:main:subagent:r${r}-${name}-${n % sessions}`, n));
          rate[name] = (records * 1e9) / Number(process.hrtime.bigint() - t0);
        }
        ratios[sessions].push(rate.store / rate.baseline);
        for (const name of ['store', 'baseline']) us[sessions][name].push(1e6 / rate[name]);
        console.log(`round ${r}, ${sessions} session(s): store ${rate.store.toFixed(0)}/s, baseline ${rate.baseline.toFixed(0)}/s, ${(rate.store / rate.baseline).toFixed(2)}× (load ${os.loadavg()[0].toFixed(2)})`);
      }
    }
    for (const s of [1, 64]) {
      const xs = ratios[s];
      const per = `store ${median(us[s].store).toFixed(0)} µs, baseline ${median(us[s].baseline).toFixed(0)} µs a record (medians)`;
      console.log(`${s} session(s): median ${median(xs).toFixed(2)}×, rounds ${Math.min(...xs).toFixed(2)}–${Math.max(...xs).toFixed(2)}×; ${per}`);
    }
  } finally {
    await store?.closeAsync();
    await pool.end();
    await cluster.stop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
