'use strict';
// Behaviour checks of retention and recovery (semantics.md#retention, semantics.md#cursors):
// resetSession and deleteSession, the automatic prune, a sweep after reopening, and a prune
// down to the row cap and then by age.

const assert = require('node:assert/strict');
const path = require('node:path');
const { T0, DAY, WAKE_WAIT_MS, sleep, range, wakesReach, noticeFor, wakeFor, openStore, assertCode, freshStore } = require('./support');

// --- resetSession / deleteSession --------------------------------------------------------------

function checkLifecycle(makeStore, tmpDir) {
  const { h, s } = freshStore(makeStore, tmpDir, 'lifecycle');
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
  const { clock, h, s } = freshStore(makeStore, tmpDir, 'prune');
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

module.exports = { checkLifecycle, checkAutoPrune, checkSweepAfterReopen, checkPrune };
