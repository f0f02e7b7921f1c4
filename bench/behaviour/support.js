'use strict';
// What the behaviour checks of bench/check-behaviour.js share: the fixed clock, the expected
// notice and wake, a store with a controllable clock, and waits for late wakes.

const assert = require('node:assert/strict');
const path = require('node:path');

const T0 = Date.UTC(2026, 0, 1); // fixed clock: every stored time is deterministic
const DAY = 24 * 60 * 60 * 1000;
const WAKE_COALESCE_MS = 5;
const WAKE_WAIT_MS = 100;

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const WAKE_TIMEOUT_MS = 10_000;
const range = (from, to, step = 1) => {
  const out = [];
  for (let i = from; i <= to; i += step) out.push(i);
  return out;
};

/** Waits until `wakes` holds `count` entries (a loaded machine may deliver them late), then a
 * little longer, so that one wake too many shows up too. */
async function wakesReach(wakes, count) {
  const deadline = Date.now() + WAKE_TIMEOUT_MS;
  while (wakes.length < count && Date.now() < deadline) await sleep(10);
  await sleep(WAKE_WAIT_MS);
}

function noticeFor(watcherKey, targetKey, changesSince) {
  const literal = JSON.stringify(targetKey);
  return {
    watcherKey,
    targetKey,
    changesSince,
    text:
      `Session ${literal} changed (other actor). ` +
      `Reconcile before acting: session_status sessionKey ${literal} changesSince ${changesSince}.`,
    contextKey: 'session-state:' + Buffer.from(targetKey, 'utf8').toString('hex'),
  };
}

function wakeFor(watcherKey, targetKey) {
  return {
    source: 'session-state',
    intent: 'immediate',
    reason: `session-state:${targetKey}`,
    sessionKey: watcherKey,
  };
}

/** A store on `file` with a controllable clock, and the wakes and errors it reported. */
function openStore(makeStore, file, clock, options = {}) {
  const h = { wakes: [], errors: [] };
  h.store = makeStore(file, {
    clock: () => clock.now,
    wake: (req) => h.wakes.push(req),
    wakeCoalesceMs: WAKE_COALESCE_MS,
    onError: (err) => h.errors.push(err),
    ...options,
  });
  return h;
}

/** A fresh store `<name>.sqlite` in `tmpDir` whose clock starts at T0: `{ clock, h, s }`, `h` as
 * {@link openStore} returns it and `s` its store. */
function freshStore(makeStore, tmpDir, name) {
  const clock = { now: T0 };
  const h = openStore(makeStore, path.join(tmpDir, `${name}.sqlite`), clock);
  return { clock, h, s: h.store };
}

function assertCode(fn, code) {
  assert.throws(fn, (err) => err instanceof Error && err.code === code);
}

module.exports = { T0, DAY, WAKE_WAIT_MS, sleep, range, wakesReach, noticeFor, wakeFor, openStore, freshStore, assertCode };
