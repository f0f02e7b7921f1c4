'use strict';
// Behaviour check for the operations the benchmark times (semantics.md#storage–semantics.md#retention). It only uses the public
// SessionState API, so it runs unchanged against the reference implementation and the native
// addon:
//
//   const { checkBehaviour } = require('./bench/check-behaviour');
//   await checkBehaviour((path, options) => new SessionState(path, options), tmpDir);
//
// `node bench/check-behaviour.js` runs it against bench/reference/ and exits non-zero on failure.

const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
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

function assertCode(fn, code) {
  assert.throws(fn, (err) => err instanceof Error && err.code === code);
}

// --- record of a notify kind with 1 watcher, drain empty / drain of 1 notice -------------------

async function checkOneWatcher(makeStore, tmpDir) {
  const clock = { now: T0 };
  const h = openStore(makeStore, path.join(tmpDir, 'one-watcher.sqlite'), clock);
  const s = h.store;
  const W = 'agent:main:main';
  const T = 'agent:main:subagent:child-1';

  assert.deepEqual(s.record({ sessionKey: T, kind: 'created', actorType: 'system', summary: 'child created' }), {
    sequence: 1, sessionKey: T, agentId: 'main', kind: 'created', actorType: 'system',
    occurredAt: T0, summary: 'child created',
  });
  assert.equal(s.watch(W, T), true); // seeded at head 1
  assert.deepEqual(s.drain(W), []); // drain empty
  assert.deepEqual(s.peek(W), []);

  clock.now = T0 + 1000;
  const e2 = s.record({
    sessionKey: T, kind: 'human_direct_message', actorType: 'human', actorId: 'telegram:42',
    runId: 'run-1', sessionId: 'sid-1', summary: 'human message via telegram',
    payload: { channel: 'telegram' },
  });
  assert.deepEqual(e2, {
    sequence: 2, sessionKey: T, agentId: 'main', kind: 'human_direct_message', actorType: 'human',
    actorId: 'telegram:42', runId: 'run-1', sessionId: 'sid-1', occurredAt: T0 + 1000,
    summary: 'human message via telegram', payload: { channel: 'telegram' },
  });
  assert.equal(h.wakes.length, 0, 'the wake is never made inside record');
  assert.deepEqual(s.peek(W), [noticeFor(W, T, 1)]);
  assert.equal(
    s.peek(W)[0].text,
    'Session "agent:main:subagent:child-1" changed (other actor). Reconcile before acting: ' +
      'session_status sessionKey "agent:main:subagent:child-1" changesSince 1.',
  );
  assert.equal(s.peek(W)[0].contextKey, 'session-state:6167656e743a6d61696e3a7375626167656e743a6368696c642d31');

  // Twenty rapid changes: still one byte-stable notice (N frozen at 2, M moves to 22).
  for (let i = 0; i < 20; i++) {
    s.record({ sessionKey: T, kind: 'goal_changed', actorType: 'human', summary: `goal ${i}` });
  }
  assert.equal(s.stateVersion(T), 22);
  assert.deepEqual(s.peek(W), [noticeFor(W, T, 1)]);
  await wakesReach(h.wakes, 1);
  assert.deepEqual(h.wakes, [wakeFor(W, T)]);

  // Drain of 1 notice: L = 2, N = 22 > old N, so exactly one fresh notice from 2 opens.
  assert.deepEqual(s.drain(W), [noticeFor(W, T, 1)]);
  assert.deepEqual(s.peek(W), [noticeFor(W, T, 2)]);
  await wakesReach(h.wakes, 2);
  assert.deepEqual(h.wakes, [wakeFor(W, T), wakeFor(W, T)]);
  assert.deepEqual(s.drain(W), [noticeFor(W, T, 2)]); // L = N = M = 22: nothing reopens
  assert.deepEqual(s.peek(W), []);
  assert.deepEqual(s.drain(W), []);
  assert.deepEqual(s.changesSince(T, 22), {
    stateVersion: 22,
    stateChanges: { events: [], truncated: false, earliestAvailableSequence: 1, historyGap: false },
  });

  // Log-only kinds and self-caused changes open nothing.
  assert.equal(s.record({ sessionKey: T, kind: 'run_completed', actorType: 'agent', summary: 'run done' }).sequence, 23);
  assert.equal(
    s.record({ sessionKey: T, kind: 'goal_changed', actorType: 'agent', actorId: W, summary: 'mine' }).sequence,
    24,
  );
  assert.deepEqual(s.peek(W), []);
  assert.equal(s.record({ sessionKey: T, kind: 'goal_changed', actorType: 'human', summary: 'theirs' }).sequence, 25);
  assert.deepEqual(s.peek(W), [noticeFor(W, T, 22)]);
  assert.deepEqual(s.changesSince(T, 22).stateChanges.events.map((e) => [e.sequence, e.kind]), [
    [23, 'run_completed'], [24, 'goal_changed'], [25, 'goal_changed'],
  ]);
  assert.equal(s.acknowledge(W, [T, T]), 1); // a repeated target counts once
  assert.deepEqual(s.peek(W), []);
  assert.equal(s.acknowledge(W, [T]), 0);

  // A key with a quote and a newline stays one line in the notice.
  const Q = 'agent:main:odd "key"\nline';
  assert.equal(s.watch(W, Q), true);
  s.record({ sessionKey: Q, kind: 'human_direct_message', actorType: 'human', summary: 'hi' });
  assert.deepEqual(s.peek(W), [noticeFor(W, Q, 0)]);
  assert.equal(
    s.peek(W)[0].text,
    'Session "agent:main:odd \\"key\\"\\nline" changed (other actor). Reconcile before acting: ' +
      'session_status sessionKey "agent:main:odd \\"key\\"\\nline" changesSince 0.',
  );
  assert.equal(s.unwatch(W, Q), true); // its pending notice goes with it
  assert.deepEqual(s.peek(W), []);
  assert.equal(s.unwatch(W, Q), false);
  await wakesReach(h.wakes, 3);
  // The change at 25 scheduled a wake; the acknowledge that emptied W's queue withdrew it, so
  // Q's notice scheduled the next one (unwatch leaves a scheduled wake alone).
  assert.deepEqual(h.wakes, [wakeFor(W, T), wakeFor(W, T), wakeFor(W, Q)]);
  assert.deepEqual(h.errors, []);

  // Refusals.
  assert.equal(s.watch('global', T), false);
  assert.equal(s.watch(W, 'global'), false);
  assert.equal(s.watch(W, W), false);
  assert.equal(s.watch('agent:MAIN:x', T), false);
  s.close();
  s.close(); // idempotent
  assert.equal(s.record({ sessionKey: T, kind: 'created', actorType: 'system', summary: 'late' }), null);
  assert.deepEqual(h.errors.map((e) => e.code), ['ERR_CLOSED']);
  assertCode(() => s.stateVersion(T), 'ERR_CLOSED');
  assertCode(() => s.drain(W), 'ERR_CLOSED');
}

// --- record of a notify kind with 100 watchers -------------------------------------------------

async function checkHundredWatchers(makeStore, tmpDir) {
  const clock = { now: T0 };
  const h = openStore(makeStore, path.join(tmpDir, 'hundred-watchers.sqlite'), clock);
  const s = h.store;
  const T = 'agent:ops:worker';
  // 0..49 main-like explicit (woken), 50..89 nested (queue only), 90..99 ambient-group (queue only)
  const watchers = range(0, 99).map((i) =>
    i < 50 ? `agent:main:w${i}` : i < 90 ? `agent:main:subagent:n${i}` : `agent:main:g${i}`);
  const wokenKeys = (list) => list.map((w) => w.sessionKey).sort();

  s.record({ sessionKey: T, kind: 'created', actorType: 'system', summary: 'created' });
  watchers.forEach((w, i) => {
    assert.equal(s.watch(w, T, i >= 90 ? { provenance: 'ambient-group' } : undefined), true);
  });

  const e = s.record({ sessionKey: T, kind: 'goal_changed', actorType: 'agent', actorId: watchers[0], summary: 'goal updated' });
  assert.deepEqual(e, {
    sequence: 2, sessionKey: T, agentId: 'ops', kind: 'goal_changed', actorType: 'agent',
    actorId: watchers[0], occurredAt: T0, summary: 'goal updated',
  });
  watchers.forEach((w, i) => assert.deepEqual(s.peek(w), i === 0 ? [] : [noticeFor(w, T, 1)]));
  assert.equal(h.wakes.length, 0);
  await wakesReach(h.wakes, 49);
  assert.deepEqual(wokenKeys(h.wakes), watchers.slice(1, 50).sort());
  assert.ok(h.wakes.every((w) => w.reason === `session-state:${T}`));

  // Second change: pending pairs are untouched, the first change's actor now gets its notice.
  s.record({ sessionKey: T, kind: 'goal_changed', actorType: 'human', summary: 'goal updated again' });
  assert.deepEqual(s.peek(watchers[0]), [noticeFor(watchers[0], T, 1)]);
  assert.deepEqual(s.peek(watchers[1]), [noticeFor(watchers[1], T, 1)]);
  await wakesReach(h.wakes, 50);
  assert.equal(h.wakes.length, 50);
  assert.deepEqual(h.wakes[49], wakeFor(watchers[0], T));

  // Drain all: N = 2 < M = 3 reopens from 2, except watcher 0 (N = M = 3).
  watchers.forEach((w) => assert.deepEqual(s.drain(w), [noticeFor(w, T, 1)]));
  watchers.forEach((w, i) => assert.deepEqual(s.peek(w), i === 0 ? [] : [noticeFor(w, T, 2)]));
  await wakesReach(h.wakes, 99);
  assert.deepEqual(wokenKeys(h.wakes.slice(50)), watchers.slice(1, 50).sort());

  // ambient-group is promoted to explicit, never the reverse.
  assert.equal(s.watch(watchers[90], T, { provenance: 'explicit' }), true);
  assert.equal(s.watch(watchers[1], T, { provenance: 'ambient-group' }), true);
  watchers.forEach((w) => s.drain(w));
  watchers.forEach((w) => assert.deepEqual(s.peek(w), []));
  h.wakes.length = 0;
  s.record({ sessionKey: T, kind: 'human_direct_message', actorType: 'human', summary: 'hello' });
  watchers.forEach((w) => assert.deepEqual(s.peek(w), [noticeFor(w, T, 3)]));
  await wakesReach(h.wakes, 51);
  assert.deepEqual(wokenKeys(h.wakes), [...watchers.slice(0, 50), watchers[90]].sort());
  assert.deepEqual(s.changesSince(T, 1).stateChanges.events.map((x) => x.sequence), [2, 3, 4]);
  assert.deepEqual(h.errors, []);
  s.close();
}

// --- record of a log-only kind, spawn edges, producer-named watchers, record input rules -------

async function checkRecordRules(makeStore, tmpDir) {
  const clock = { now: T0 };
  const h = openStore(makeStore, path.join(tmpDir, 'record-rules.sqlite'), clock);
  const s = h.store;
  const P = 'agent:main:main';
  const C1 = 'agent:main:subagent:kid';
  const C2 = 'agent:main:subagent:kid2';
  const G = 'agent:main:subagent:kid:subagent:grandkid';

  // Spawn edge seeds the parent's cursor; bare, empty, self and duplicate watchers are dropped.
  const spawn = s.record({
    sessionKey: C1, kind: 'child_spawned', actorType: 'agent', actorId: P, summary: 'spawned',
    watchers: [P, 'global', C1, 'agent:MAIN:x', P], // a blank entry is refused (semantics.md#api-arguments)
  });
  assert.equal(spawn.sequence, 1);
  assert.deepEqual(s.peek(P), []);
  s.record({ sessionKey: C1, kind: 'human_direct_message', actorType: 'human', summary: 'hi' }); // 2
  assert.deepEqual(s.peek(P), [noticeFor(P, C1, 1)]);
  assert.deepEqual(s.drain(P), [noticeFor(P, C1, 1)]);
  s.record({ sessionKey: C1, kind: 'human_direct_message', actorType: 'human', summary: 'hi' }); // 3
  assert.deepEqual(s.peek(P), [noticeFor(P, C1, 2)]);
  s.record({ sessionKey: C1, kind: 'child_spawned', actorType: 'agent', summary: 'respawn', watchers: [P] }); // 4
  assert.deepEqual(s.peek(P), [], 're-seed drops the pending notice');
  s.record({ sessionKey: C1, kind: 'goal_changed', actorType: 'human', summary: 'goal' }); // 5
  assert.deepEqual(s.peek(P), [noticeFor(P, C1, 4)]);

  // Producer-named watcher without a cursor on a notify kind: L = 0.
  s.record({ sessionKey: C2, kind: 'goal_changed', actorType: 'human', summary: 'goal', watchers: [P] }); // 6
  assert.deepEqual(s.peek(P), [noticeFor(P, C1, 4), noticeFor(P, C2, 0)]);
  // Log-only kind: logged, head bumped, nobody notified (not even a named watcher).
  const C3 = 'agent:main:subagent:kid3';
  assert.deepEqual(s.record({ sessionKey: C3, kind: 'run_failed', actorType: 'system', summary: 'run failed', watchers: [P], payload: { outcome: 'timeout' } }), {
    sequence: 7, sessionKey: C3, agentId: 'main', kind: 'run_failed', actorType: 'system',
    occurredAt: T0, summary: 'run failed', payload: { outcome: 'timeout' },
  });
  assert.equal(s.stateVersion(C3), 7);
  assert.equal(s.watch(P, C3), true);
  s.record({ sessionKey: C3, kind: 'human_direct_message', actorType: 'human', summary: 'x' }); // 8
  assert.deepEqual(s.peek(P), [noticeFor(P, C1, 4), noticeFor(P, C2, 0), noticeFor(P, C3, 7)]);
  // Bare target: logged, never a cursor.
  s.record({ sessionKey: 'global', kind: 'child_spawned', actorType: 'agent', summary: 's', watchers: [P] }); // 9
  s.record({ sessionKey: 'global', kind: 'human_direct_message', actorType: 'human', summary: 'x', watchers: [P] }); // 10
  assert.equal(s.peek(P).length, 3);
  // Nested watcher: queued, never woken.
  s.record({ sessionKey: G, kind: 'child_spawned', actorType: 'agent', summary: 's', watchers: [C1] }); // 11
  s.record({ sessionKey: G, kind: 'goal_changed', actorType: 'human', summary: 'g' }); // 12
  assert.deepEqual(s.peek(C1), [noticeFor(C1, G, 11)]);
  await wakesReach(h.wakes, 1);
  assert.deepEqual(h.wakes, [wakeFor(P, C1)]);
  assert.deepEqual(h.errors, []);

  // onlyIfWatched: silent null when nobody watches (bare watchers do not count).
  const lonely = { sessionKey: 'agent:ops:lonely', kind: 'goal_changed', actorType: 'human', summary: 'g', onlyIfWatched: true };
  assert.equal(s.record(lonely), null);
  assert.equal(s.record({ ...lonely, watchers: ['global', 'main'] }), null);
  assert.equal(s.stateVersion('agent:ops:lonely'), 0);
  assert.equal(s.record({ ...lonely, watchers: [P] }).sequence, 13);
  assert.equal(s.record({ sessionKey: C1, kind: 'run_completed', actorType: 'agent', summary: 'w', onlyIfWatched: true }).sequence, 14);
  assert.deepEqual(h.errors, []);

  // Agents: defaults, bare keys per agent, mismatches.
  assert.equal(s.record({ sessionKey: 'global', agentId: 'ops', kind: 'compacted', actorType: 'system', summary: 'c' }).agentId, 'ops');
  assert.equal(s.stateVersion('global', { agentId: 'ops' }), 15);
  assert.equal(s.stateVersion('global'), 10);
  assert.equal(s.record({ sessionKey: 'agent:MAIN:x', kind: 'compacted', actorType: 'system', summary: 'c' }).agentId, 'main');

  // Summary: each line break becomes one space; 240 scalar values kept; no trim.
  const rec = (extra) => s.record({ sessionKey: 'agent:ops:input', kind: 'compacted', actorType: 'system', summary: 's', ...extra });
  assert.equal(rec({ summary: ' a\r\nb\rc\nd\u2028e\u2029f\r\n\r\n ' }).summary, ' a b c d e f   ');
  assert.equal(rec({ summary: '\u{1F600}'.repeat(300) }).summary, '\u{1F600}'.repeat(240));
  assert.equal(rec({ summary: 'x'.repeat(239) + '\r\ny' }).summary, 'x'.repeat(239) + ' ');
  // Payload: compact JSON of at most 4096 UTF-8 bytes; null = absent.
  assert.deepEqual(rec({ payload: { p: 'x'.repeat(4088) } }).payload, { p: 'x'.repeat(4088) });
  assert.equal('payload' in rec({ payload: null }), false);
  // occurredAt: floored, clamped to [now - 24h, now].
  assert.equal(rec({ occurredAt: T0 - 2 * DAY }).occurredAt, T0 - DAY);
  assert.equal(rec({ occurredAt: T0 + 5000 }).occurredAt, T0);
  assert.equal(rec({ occurredAt: T0 - 1000.4 }).occurredAt, T0 - 1001);
  assert.equal(rec({ occurredAt: Number.NaN }).occurredAt, T0);
  // dedupeKey: the second record returns the first row and changes nothing; '' = absent.
  const first = rec({ dedupeKey: 'dedupe-1', summary: 'first' });
  const head = s.stateVersion('agent:ops:input');
  assert.deepEqual(rec({ dedupeKey: 'dedupe-1', summary: 'second' }), first);
  assert.equal(s.stateVersion('agent:ops:input'), head);
  assert.ok(rec({ dedupeKey: '' }).sequence > head);
  assert.ok(rec({ dedupeKey: '' }).sequence > head + 1);
  assert.deepEqual(h.errors, []);

  // Failures: null and exactly one onError per record.
  const bad = [
    { payload: { p: 'x'.repeat(4089) } },
    { payload: [1, 2] },
    { agentId: 'main' },
    { agentId: 'Ops' },
    { kind: 'nope' },
    { actorType: 'robot' },
    { summary: 42 },
  ];
  for (const extra of bad) assert.equal(rec(extra), null);
  assert.deepEqual(h.errors.map((e) => e.code), bad.map(() => 'ERR_INVALID_ARG'));

  // A reopened notice re-enters the queue at its end.
  const L = 'agent:ops:lonely';
  assert.deepEqual(s.peek(P).map((n) => [n.targetKey, n.changesSince]), [[C1, 4], [C2, 0], [C3, 7], [L, 0]]);
  s.record({ sessionKey: C1, kind: 'goal_changed', actorType: 'human', summary: 'again' });
  assert.equal(s.acknowledge(P, [C1, 'agent:main:subagent:none']), 1);
  assert.deepEqual(s.peek(P).map((n) => [n.targetKey, n.changesSince]), [[C2, 0], [C3, 7], [L, 0], [C1, 5]]);
  s.close();
}

// --- resetSession / deleteSession --------------------------------------------------------------

function checkLifecycle(makeStore, tmpDir) {
  const clock = { now: T0 };
  const h = openStore(makeStore, path.join(tmpDir, 'lifecycle.sqlite'), clock);
  const s = h.store;
  const W = 'agent:main:main';
  const T = 'agent:main:subagent:t';
  const U = 'agent:ops:u';
  const rec = (k, kind, extra) => s.record({ sessionKey: k, kind, actorType: 'human', summary: kind, ...extra });
  rec(T, 'created'); // 1
  rec(U, 'created'); // 2
  s.watch(W, T);
  s.watch(W, U);
  s.watch(T, U);
  rec(T, 'human_direct_message'); // 3
  rec(U, 'human_direct_message'); // 4
  assert.deepEqual(s.peek(W), [noticeFor(W, T, 1), noticeFor(W, U, 2)]);
  assert.deepEqual(s.peek(T), [noticeFor(T, U, 2)]);

  s.resetSession(W); // W's cursors and notices go; the targets' history stays
  assert.deepEqual(s.peek(W), []);
  rec(T, 'human_direct_message'); // 5
  assert.deepEqual(s.peek(W), []);
  assert.equal(s.watch(W, T), true); // seeded at 5
  rec(T, 'goal_changed'); // 6
  assert.deepEqual(s.peek(W), [noticeFor(W, T, 5)]);

  s.deleteSession(T); // events, head, and every cursor with T as watcher or target
  assert.deepEqual(s.peek(W), []);
  assert.deepEqual(s.peek(T), []);
  assert.deepEqual(s.changesSince(T, 0), {
    stateVersion: 0,
    stateChanges: { events: [], truncated: false, earliestAvailableSequence: 0, historyGap: false },
  });
  rec(T, 'goal_changed'); // 7
  assert.deepEqual(s.peek(W), []);
  assert.equal(s.changesSince(T, 0).stateChanges.earliestAvailableSequence, 7);
  assert.equal(s.changesSince(U, 0).stateVersion, 4);

  rec('global', 'compacted'); // 8
  rec('global', 'compacted', { agentId: 'ops' }); // 9
  s.deleteSession('global', { agentId: 'ops' });
  assert.equal(s.stateVersion('global', { agentId: 'ops' }), 0);
  assert.equal(s.stateVersion('global'), 8);
  assertCode(() => s.deleteSession(T, { agentId: 'ops' }), 'ERR_INVALID_ARG');
  assert.deepEqual(h.errors, []);
  s.close();
}

// --- automatic prune: the first record after opening, then at most once an hour ---------------

// An implementation may prune in the background (the addon does, so a large backlog never holds
// the caller's thread): assertions about a prune poll for a bounded time, and assertions that no
// prune happened first give a background prune the time to show up.
async function eventually(check) {
  for (let i = 0; ; i++) {
    try {
      return check();
    } catch (err) {
      if (i >= 250) throw err;
      await sleep(20);
    }
  }
}

async function checkAutoPrune(makeStore, tmpDir) {
  const clock = { now: T0 };
  const file = path.join(tmpDir, 'auto-prune.sqlite');
  const OLD = 'agent:main:subagent:old';
  const NEW = 'agent:main:subagent:new';
  const events = (s, k) => s.changesSince(k, 0).stateChanges.events.map((e) => e.sequence);
  const rec = (s, k, extra) => s.record({ sessionKey: k, kind: 'compacted', actorType: 'system', summary: 'c', ...extra });

  let h = openStore(makeStore, file, clock, { retentionMs: DAY });
  rec(h.store, OLD); // 1, at T0 (this first record pruned an empty log)
  clock.now = T0 + DAY + 30 * 60_000;
  rec(h.store, NEW); // 2: more than an hour since the last prune, so 1 goes
  await eventually(() =>
    assert.deepEqual(h.store.changesSince(OLD, 0), {
      stateVersion: 1,
      stateChanges: { events: [], truncated: false, earliestAvailableSequence: 2, historyGap: true },
    }),
  );
  h.store.close();

  const T3 = T0 + 3 * DAY;
  clock.now = T3;
  h = openStore(makeStore, file, clock, { retentionMs: DAY });
  const s = h.store;
  assert.deepEqual(events(s, NEW), [2], 'opening never prunes');
  rec(s, OLD); // 3: the first record after opening prunes 2
  await eventually(() => assert.deepEqual(events(s, NEW), []));
  rec(s, NEW, { occurredAt: T3 - DAY }); // 4: back-dated, prunable as soon as the clock moves
  clock.now = T3 + 30 * 60_000;
  rec(s, OLD); // 5: within the hour, no prune
  await sleep(200);
  assert.deepEqual(events(s, NEW), [4]);
  clock.now = T3 + 61 * 60_000;
  rec(s, OLD); // 6: an hour has passed, 4 goes
  await eventually(() => assert.deepEqual(events(s, NEW), []));
  assert.deepEqual(events(s, OLD), [3, 5, 6]);
  assert.deepEqual(h.errors, []);
  s.close();
}

// --- changesSince of 200 events ----------------------------------------------------------------

function checkChangesSince(makeStore, tmpDir) {
  const clock = { now: T0 };
  const h = openStore(makeStore, path.join(tmpDir, 'changes-since.sqlite'), clock);
  const s = h.store;
  const X = 'agent:main:subagent:x';
  const Y = 'agent:main:subagent:y';
  for (let i = 1; i <= 400; i++) {
    if (i % 2 === 1) {
      s.record({ sessionKey: X, kind: 'run_completed', actorType: 'agent', runId: `run-${i}`, summary: `x ${i}`, payload: { i } });
    } else {
      s.record({ sessionKey: Y, kind: 'compacted', actorType: 'system', summary: `y ${i}` });
    }
  }
  let r = s.changesSince(X, 0);
  assert.equal(r.stateVersion, 399);
  assert.deepEqual(r.stateChanges.events.map((e) => e.sequence), range(1, 399, 2));
  assert.equal(r.stateChanges.truncated, false);
  assert.equal(r.stateChanges.earliestAvailableSequence, 1);
  assert.equal(r.stateChanges.historyGap, false);
  assert.deepEqual(r.stateChanges.events[199], {
    sequence: 399, sessionKey: X, agentId: 'main', kind: 'run_completed', actorType: 'agent',
    runId: 'run-399', occurredAt: T0, summary: 'x 399', payload: { i: 399 },
  });

  s.record({ sessionKey: X, kind: 'goal_changed', actorType: 'human', summary: 'x 401' });
  r = s.changesSince(X, 0);
  assert.equal(r.stateVersion, 401);
  assert.deepEqual(r.stateChanges.events.map((e) => e.sequence), range(1, 399, 2));
  assert.equal(r.stateChanges.truncated, true);
  r = s.changesSince(X, 399);
  assert.deepEqual(r, {
    stateVersion: 401,
    stateChanges: {
      events: [{ sequence: 401, sessionKey: X, agentId: 'main', kind: 'goal_changed', actorType: 'human', occurredAt: T0, summary: 'x 401' }],
      truncated: false, earliestAvailableSequence: 1, historyGap: false,
    },
  });
  assert.deepEqual(s.changesSince(Y, 300).stateChanges.events.map((e) => e.sequence), range(302, 400, 2));
  assert.equal(s.changesSince(Y, 0).stateChanges.earliestAvailableSequence, 2);

  // limit: floored, clamped to [1, 200]; non-finite is an error.
  const lim = (limit) => s.changesSince(X, 0, { limit }).stateChanges;
  assert.deepEqual(lim(10.9).events.map((e) => e.sequence), range(1, 19, 2));
  assert.equal(lim(10.9).truncated, true);
  assert.equal(lim(0).events.length, 1);
  assert.equal(lim(-5).events.length, 1);
  assert.equal(lim(1e9).events.length, 200);
  assert.equal(lim(undefined).events.length, 200);
  assertCode(() => lim(Number.NaN), 'ERR_INVALID_ARG');
  assertCode(() => lim(Infinity), 'ERR_INVALID_ARG');
  for (const after of [-1, 1.5, Number.MAX_SAFE_INTEGER + 1, Number.NaN]) {
    assertCode(() => s.changesSince(X, after), 'ERR_INVALID_ARG');
  }
  assert.deepEqual(s.changesSince('agent:main:unknown', 0), {
    stateVersion: 0,
    stateChanges: { events: [], truncated: false, earliestAvailableSequence: 0, historyGap: false },
  });
  // The same bare key under two agents is two sessions.
  s.record({ sessionKey: 'global', agentId: 'ops', kind: 'compacted', actorType: 'system', summary: 'o' }); // 402
  s.record({ sessionKey: 'global', kind: 'compacted', actorType: 'system', summary: 'm' }); // 403
  assert.deepEqual(s.changesSince('global', 0, { agentId: 'ops' }).stateChanges.events.map((e) => [e.sequence, e.agentId]), [[402, 'ops']]);
  assert.deepEqual(s.changesSince('global', 0).stateChanges.events.map((e) => [e.sequence, e.agentId]), [[403, 'main']]);
  assertCode(() => s.changesSince(X, 0, { agentId: 'ops' }), 'ERR_INVALID_ARG');
  assert.deepEqual(h.errors, []);
  s.close();
}

// --- stateVersions of 500 keys -----------------------------------------------------------------

function checkStateVersions(makeStore, tmpDir) {
  const clock = { now: T0 };
  const h = openStore(makeStore, path.join(tmpDir, 'state-versions.sqlite'), clock);
  const s = h.store;
  const refs = range(0, 499).map((i) =>
    i % 25 === 0 ? { sessionKey: `legacy-${i}`, agentId: 'ops' } : { sessionKey: `agent:main:subagent:s${i}` });
  const versions = new Map();
  let sequence = 0;
  const bump = (i) => {
    const ref = refs[i];
    s.record({ ...ref, kind: 'run_completed', actorType: 'agent', summary: `s ${i}` });
    versions.set(i, ++sequence);
  };
  for (let i = 0; i < 500; i++) if (i % 5 !== 4) bump(i);
  for (let i = 0; i < 500; i += 7) if (i % 5 !== 4) bump(i);

  const expected = [];
  refs.forEach((ref, i) => {
    if (versions.has(i)) {
      expected.push({ sessionKey: ref.sessionKey, agentId: ref.agentId ?? 'main', stateVersion: versions.get(i) });
    }
  });
  assert.equal(expected.length, 400);
  assert.deepEqual(s.stateVersions(refs), expected);
  assert.equal(s.stateVersion('agent:main:subagent:s7'), versions.get(7));
  assert.equal(s.stateVersion('agent:main:subagent:s4'), 0);
  assert.equal(s.stateVersion('legacy-0'), 0); // agent main: never recorded
  assert.deepEqual(s.stateVersions([]), []);
  assertCode(() => s.stateVersions([{ sessionKey: 'agent:main:x', agentId: 'ops' }]), 'ERR_INVALID_ARG');
  assert.deepEqual(h.errors, []);
  s.close();
}

// --- sweep after reopen ------------------------------------------------------------------------

async function checkSweepAfterReopen(makeStore, tmpDir) {
  const clock = { now: T0 };
  const file = path.join(tmpDir, 'sweep.sqlite');
  const W = 'agent:main:main';
  const WN = 'agent:main:subagent:parent';
  const WG = 'agent:main:gone';
  const A = 'agent:main:subagent:a';
  const B = 'agent:main:subagent:b';
  const C = 'agent:ops:c';

  const h1 = openStore(makeStore, file, clock);
  let s = h1.store;
  for (const t of [A, B, C]) s.record({ sessionKey: t, kind: 'created', actorType: 'system', summary: 'c' }); // 1..3
  s.watch(W, A); // L = 1
  s.watch(W, B); // L = 2
  s.watch(WN, C); // L = 3
  s.watch(WG, C); // L = 3
  s.record({ sessionKey: A, kind: 'human_direct_message', actorType: 'human', summary: 'a' }); // 4: N = M = 4
  s.record({ sessionKey: B, kind: 'human_direct_message', actorType: 'human', summary: 'b' }); // 5: N = M = 5
  s.record({ sessionKey: A, kind: 'goal_changed', actorType: 'human', summary: 'a' }); // 6: N = 4, M = 6
  s.record({ sessionKey: C, kind: 'goal_changed', actorType: 'human', summary: 'c' }); // 7: N = M = 7
  assert.deepEqual(s.peek(W), [noticeFor(W, A, 1), noticeFor(W, B, 2)]);
  s.close(); // cancels the pending wake
  await sleep(WAKE_WAIT_MS);
  assert.deepEqual(h1.wakes, []);

  // Without the cross-process poll, a first peek reads nothing from the file either
  // (semantics.md#processes): only the sweep re-queues.
  const h2 = openStore(makeStore, file, clock, { syncIntervalMs: 0 });
  s = h2.store;
  assert.deepEqual(s.peek(W), [], 'the queue is memory only');
  assert.deepEqual(s.sweep({ watcherExists: (w) => w !== WG }), { notices: 3, prune: { eventsDeleted: 0, cursorsDeleted: 0 } });
  // Re-queued in ascending order of the re-frozen N (B: 5, A: 6, C: 7), text from L.
  assert.deepEqual(s.peek(W), [noticeFor(W, B, 2), noticeFor(W, A, 1)]);
  assert.deepEqual(s.peek(WN), [noticeFor(WN, C, 3)]);
  await wakesReach(h2.wakes, 1);
  assert.deepEqual(h2.wakes, [wakeFor(W, B)]);
  // Read last: in an implementation of semantics.md#processes, peeking for a watcher makes this process serve it,
  // and its pending notice then arrives by the cross-process poll like the second sweep's.
  assert.deepEqual(s.peek(WG), []);
  // A second sweep neither duplicates nor re-wakes what is already queued.
  assert.deepEqual(s.sweep(), { notices: 4, prune: { eventsDeleted: 0, cursorsDeleted: 0 } });
  assert.deepEqual(s.peek(W), [noticeFor(W, B, 2), noticeFor(W, A, 1)]);
  assert.deepEqual(s.peek(WG), [noticeFor(WG, C, 3)]);
  await wakesReach(h2.wakes, 2);
  assert.deepEqual(h2.wakes, [wakeFor(W, B), wakeFor(WG, C)]);
  // Sweep froze N = M, so draining A (N was 4, M = 6) reopens nothing.
  assert.deepEqual(s.drain(W), [noticeFor(W, B, 2), noticeFor(W, A, 1)]);
  assert.deepEqual(s.peek(W), []);
  assert.deepEqual(s.changesSince(A, 1).stateChanges.events.map((e) => e.sequence), [4, 6]);
  s.close();

  // Without a sweep, a lost notice self-heals on the target's next material event.
  const h3 = openStore(makeStore, file, clock);
  s = h3.store;
  s.record({ sessionKey: C, kind: 'human_direct_message', actorType: 'human', summary: 'c' }); // 8
  assert.deepEqual(s.peek(WN), [noticeFor(WN, C, 3)]);
  assert.deepEqual(s.peek(WG), [noticeFor(WG, C, 3)]);
  assert.deepEqual(s.drain(WN), [noticeFor(WN, C, 3)]); // N = 7 < M = 8: reopens from 7
  assert.deepEqual(s.peek(WN), [noticeFor(WN, C, 7)]);
  await wakesReach(h3.wakes, 1);
  assert.deepEqual(h3.wakes, [wakeFor(WG, C)]); // the nested watcher is never woken
  assert.deepEqual([...h1.errors, ...h2.errors, ...h3.errors], []);
  s.close();
}

// --- prune from 60,000 rows down to the 50,000 cap, then by age --------------------------------

function checkPrune(makeStore, tmpDir) {
  const clock = { now: T0 };
  const h = openStore(makeStore, path.join(tmpDir, 'prune.sqlite'), clock);
  const s = h.store;
  const keys = range(0, 3).map((i) => `agent:main:subagent:p${i}`);
  const BOSS = 'agent:main:boss';
  // Round robin: sequence q belongs to keys[(q - 1) % 4].
  for (let q = 1; q < 60_000; q++) {
    s.record({ sessionKey: keys[(q - 1) % 4], kind: 'run_completed', actorType: 'agent', summary: `r ${q}` });
  }
  assert.equal(s.watch(BOSS, keys[3]), true); // L = 59996
  s.record({ sessionKey: keys[3], kind: 'human_direct_message', actorType: 'human', summary: 'h' }); // 60000
  assert.deepEqual(s.peek(BOSS), [noticeFor(BOSS, keys[3], 59996)]);
  assert.deepEqual(s.stateVersions(keys.map((sessionKey) => ({ sessionKey }))).map((v) => v.stateVersion), [59997, 59998, 59999, 60000]);

  assert.deepEqual(s.prune(), { eventsDeleted: 10_000, cursorsDeleted: 0 });
  // Watermark per session = the largest sequence it lost (1..10000 deleted).
  const watermarks = [9997, 9998, 9999, 10000];
  keys.forEach((k, i) => {
    const r = s.changesSince(k, 0);
    assert.equal(r.stateVersion, 59997 + i);
    assert.equal(r.stateChanges.historyGap, true);
    assert.equal(r.stateChanges.earliestAvailableSequence, 10001 + i);
    assert.equal(r.stateChanges.truncated, true);
    assert.deepEqual(r.stateChanges.events.map((e) => e.sequence), range(10001 + i, 10001 + i + 4 * 199, 4));
    assert.equal(s.changesSince(k, watermarks[i]).stateChanges.historyGap, false);
    assert.equal(s.changesSince(k, watermarks[i] - 1).stateChanges.historyGap, true);
  });
  assert.deepEqual(s.prune(), { eventsDeleted: 0, cursorsDeleted: 0 });
  assert.deepEqual(s.peek(BOSS), [noticeFor(BOSS, keys[3], 59996)]);

  // Thirty days later: every event and the idle cursor (with its notice) go; heads stay.
  clock.now = T0 + 30 * DAY + 1;
  assert.deepEqual(s.prune(), { eventsDeleted: 50_000, cursorsDeleted: 1 });
  assert.deepEqual(s.peek(BOSS), []);
  assert.deepEqual(s.changesSince(keys[3], 0), {
    stateVersion: 60000,
    stateChanges: { events: [], truncated: false, earliestAvailableSequence: 60001, historyGap: true },
  });
  assert.equal(s.changesSince(keys[3], 60000).stateChanges.historyGap, false);
  assert.equal(s.changesSince(keys[0], 59996).stateChanges.historyGap, true);
  assert.equal(s.changesSince(keys[0], 59997).stateChanges.historyGap, false);
  assert.equal(s.record({ sessionKey: keys[0], kind: 'goal_changed', actorType: 'human', summary: 'g' }).sequence, 60001);
  assert.equal(s.stateVersion(keys[0]), 60001);
  assert.deepEqual(h.errors, []);
  s.close();
}

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
