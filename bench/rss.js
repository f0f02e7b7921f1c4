'use strict';
// `node --expose-gc bench/rss.js addon|reference`: the resident memory of a fresh process
// holding one store with 100,000 cursors and 100,000 pending notices. Prints one JSON line:
// `baseline` (MiB, the store open and empty) and `rss` (MiB, after). run.js starts it once
// per implementation, so no other workload's memory is counted.

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { buildHundredThousandCursors } = require('./workloads');

const impl = process.argv[2];
const Impl =
  impl === 'addon'
    ? require('..').SessionState
    : require('./reference/session-state').ReferenceSessionState;

function rssMiB() {
  global.gc();
  global.gc();
  return process.memoryUsage().rss / (1024 * 1024);
}

const dir = fs.mkdtempSync(path.join(os.tmpdir(), `session-awareness-rss-${impl}-`));
try {
  const errors = [];
  const store = new Impl(path.join(dir, 'rss.sqlite'), {
    wake: () => {},
    onError: (err) => errors.push(err),
  });
  const baseline = rssMiB();
  buildHundredThousandCursors(store);
  // Measured before the check below, whose 100,000 notice objects are garbage the JS heap
  // may keep resident; what is measured is the state, not the reading of it.
  const rss = rssMiB();
  let pending = 0;
  for (let i = 0; i < 100; i++) pending += store.peek(`agent:w${i}:main`).length;
  if (pending !== 100_000) throw new Error(`${pending} notices pending, expected 100,000`);
  if (errors.length > 0) throw errors[0];
  store.close();
  console.log(JSON.stringify({ baseline, rss }));
} finally {
  fs.rmSync(dir, { recursive: true, force: true });
}
