'use strict';
// The writing process of `npm run bench:follow` (bench/follow.js): opens the store at the file
// or URL it is given and records on its parent's command over IPC. `record` answers the time
// just before the call (`performance.timeOrigin + performance.now()`, ms since the epoch) and
// the sequence recorded.

const { SessionState } = require('..');
const { now, send, humanMessage: input } = require('./messages');

const [where, optionsJson] = process.argv.slice(2);

async function main() {
  const store = await SessionState.open(where, JSON.parse(optionsJson || '{}'));
  const commands = {
    async record({ session, n, watchers }) {
      const t0 = now();
      const e = await store.recordAsync(input(session, n, watchers));
      return { sequence: e ? e.sequence : null, t0 };
    },
    async watch({ watcher, target }) {
      return store.watchAsync(watcher, target);
    },
  };
  process.on('message', ({ id, cmd, args }) => {
    Promise.resolve()
      .then(() => commands[cmd](args || {}))
      .then(
        (result) => send({ id, result }),
        (err) => send({ id, error: { code: err.code, message: err.message } }),
      );
  });
  process.on('disconnect', () => store.closeAsync().finally(() => process.exit(0)));
  send({ ready: true });
}

main().catch((err) => {
  send({ failed: true, code: err.code, message: err.message });
  process.exit(1);
});
