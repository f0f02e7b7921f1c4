'use strict';
// Behaviour checks of recording (semantics.md#recording, semantics.md#cursors): a notify kind
// with 1 and with 100 watchers and their drains, a log-only kind, spawn edges,
// producer-named watchers and the record input rules.

const assert = require('node:assert/strict');
const { T0, DAY, range, wakesReach, noticeFor, wakeFor, assertCode, freshStore } = require('./support');

// --- record of a notify kind with 1 watcher, drain empty / drain of 1 notice -------------------

async function checkOneWatcher(makeStore, tmpDir) {
  const { clock, h, s } = freshStore(makeStore, tmpDir, 'one-watcher');
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
  const { h, s } = freshStore(makeStore, tmpDir, 'hundred-watchers');
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
  const { h, s } = freshStore(makeStore, tmpDir, 'record-rules');
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

module.exports = { checkOneWatcher, checkHundredWatchers, checkRecordRules };
