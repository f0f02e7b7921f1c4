'use strict';
// Behaviour check for the operations the benchmark times (semantics.md#storage–semantics.md#retention). It only uses the public
// SessionState API, so it runs unchanged against the reference implementation and the native
// addon:
//
//   const { checkBehaviour } = require('./bench/check-behaviour');
//   await checkBehaviour((path, options) => new SessionState(path, options), tmpDir);
//
// `node bench/check-behaviour.js` runs it against bench/reference/ and exits non-zero on failure.
// The checks live in bench/behaviour/: recording, reads, and retention and recovery.

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { checkOneWatcher, checkHundredWatchers, checkRecordRules } = require('./behaviour/records');
const { checkChangesSince, checkStateVersions } = require('./behaviour/reads');
const {
  checkLifecycle,
  checkAutoPrune,
  checkSweepAfterReopen,
  checkPrune,
} = require('./behaviour/retention');

async function checkBehaviour(makeStore, tmpDir) {
  fs.mkdirSync(tmpDir, { recursive: true });
  const checks = [
    ['record notify, 1 watcher; drain', checkOneWatcher],
    ['record notify, 100 watchers', checkHundredWatchers],
    ['record log-only, spawn, input rules', checkRecordRules],
    ['changesSince of 200 events', checkChangesSince],
    ['stateVersions of 500 keys', checkStateVersions],
    ['sweep after reopen', checkSweepAfterReopen],
    ['prune 60,000 -> 50,000', checkPrune],
    ['automatic prune', checkAutoPrune],
    ['resetSession, deleteSession', checkLifecycle],
  ];
  for (const [name, check] of checks) {
    try {
      await check(makeStore, tmpDir);
    } catch (err) {
      err.message = `${name}: ${err.message}`;
      throw err;
    }
  }
  return checks.map(([name]) => name);
}

module.exports = { checkBehaviour };

if (require.main === module) {
  const { ReferenceSessionState } = require('./reference/session-state');
  const tmpDir = fs.mkdtempSync(path.join(os.tmpdir(), 'session-state-check-'));
  checkBehaviour((file, options) => new ReferenceSessionState(file, options), tmpDir)
    .then((names) => {
      for (const name of names) console.log(`ok - ${name}`);
    })
    .catch((err) => {
      console.error(err);
      process.exitCode = 1;
    })
    .finally(() => fs.rmSync(tmpDir, { recursive: true, force: true }));
}
