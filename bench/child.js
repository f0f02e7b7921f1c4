'use strict';
// One benchmark process for one implementation: `node bench/child.js addon|reference`.
// Driven by bench/run.js over IPC: `setup` builds a workload's fixtures, `round` returns one
// timed sample, `exit` cleans up.

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { WORKLOADS } = require('./workloads');

const impl = process.argv[2];
const Impl =
  impl === 'addon'
    ? // bench/compare.js points this at another build of the package.
      require(process.env.SESSION_AWARENESS_BENCH_ROOT || '..').SessionState
    : require('./reference/session-state').ReferenceSessionState;

const dir = fs.mkdtempSync(path.join(os.tmpdir(), `session-awareness-bench-${impl}-`));
const errors = [];
const open = (file, extra = {}) =>
  new Impl(file, { wake: () => {}, onError: (err) => errors.push(err), ...extra });
const shared = {};
const contexts = new Map();

function checkErrors() {
  if (errors.length > 0) {
    const err = errors[0];
    errors.length = 0;
    throw new Error(`onError was called: ${err.code}: ${err.message}`);
  }
}

async function handle(msg) {
  switch (msg.cmd) {
    case 'setup': {
      const ctx = { dir, open, shared };
      contexts.set(msg.index, ctx);
      WORKLOADS[msg.index].setup(ctx);
      checkErrors();
      return {};
    }
    case 'round': {
      const out = await WORKLOADS[msg.index].round(contexts.get(msg.index));
      checkErrors();
      return typeof out === 'number' ? { ns: out } : out;
    }
    default:
      throw new Error(`unknown command ${msg.cmd}`);
  }
}

process.on('message', (msg) => {
  if (msg.cmd === 'exit') {
    for (const ctx of contexts.values()) ctx.store?.close();
    fs.rmSync(dir, { recursive: true, force: true });
    process.disconnect();
    return;
  }
  handle(msg).then(
    (reply) => process.send({ ok: true, ...reply }),
    (err) => process.send({ ok: false, error: String(err && err.stack) }),
  );
});
