'use strict';
// One gateway process of the PostgreSQL store's benchmarks (bench/postgres/store.js): opens the
// store at the URL it is given and answers its parent's commands over IPC, through the
// Promise API. Every notice entering its queue is reported with the time it entered
// ({ type: 'notice', target, at }, `at` in ms since the epoch, `performance.timeOrigin +
// performance.now()`), every wake likewise ({ type: 'wake', session, reason, at }).

const { SessionState } = require('../..');
const { now, send, humanMessage: input } = require('../messages');

const [url, optionsJson] = process.argv.slice(2);

async function main() {
  const store = await SessionState.open(url, {
    ...JSON.parse(optionsJson || '{}'),
    wake: (req) => send({ type: 'wake', session: req.sessionKey, reason: req.reason, at: now() }),
    onNotice: (n) => send({ type: 'notice', target: n.targetKey, at: now() }),
    onError: (err) => send({ type: 'error', code: err.code, message: err.message }),
  });
  const commands = {
    async watch({ watcher, targets }) {
      for (const t of targets) await store.watchAsync(watcher, t);
      // A drain serves the watcher here (semantics.md#processes).
      await store.drainAsync(watcher);
      return true;
    },
    async drain({ watcher }) {
      return (await store.drainAsync(watcher)).length;
    },
    async record({ session, n }) {
      const t0 = now();
      const e = await store.recordAsync(input(session, n));
      return { sequence: e ? e.sequence : null, t0 };
    },
    // `count` records over `sessions` sessions of `tag`, `k` in flight; resolves to records/s.
    async throughput({ tag, count, k, sessions, watchers }) {
      let issued = 0;
      const t0 = process.hrtime.bigint();
      const lane = async () => {
        while (issued < count) {
          const n = issued++;
          await store.recordAsync(input(`agent:main:subagent:${tag}-${n % sessions}`, n, watchers));
        }
      };
      await Promise.all(Array.from({ length: Math.min(k, count) }, lane));
      return (count * 1e9) / Number(process.hrtime.bigint() - t0);
    },
    async close() {
      await store.closeAsync();
      return true;
    },
  };
  process.on('message', ({ id, cmd, args }) => {
    commands[cmd](args || {}).then(
      (result) => send({ type: 'reply', id, result }),
      (err) => send({ type: 'reply', id, error: `${err.code}: ${err.message}` }),
    );
  });
  process.on('disconnect', () => store.closeAsync().finally(() => process.exit(0)));
  send({ type: 'ready' });
}

main().catch((err) => {
  send({ type: 'failed', error: `${err.code}: ${err.message}` });
  process.exit(1);
});
