'use strict';
// Behaviour checks of the reads (semantics.md#reading): changesSince of 200 events and
// stateVersions of 500 keys.

const assert = require('node:assert/strict');
const { T0, range, assertCode, freshStore } = require('./support');

// --- changesSince of 200 events ----------------------------------------------------------------

function checkChangesSince(makeStore, tmpDir) {
  const { h, s } = freshStore(makeStore, tmpDir, 'changes-since');
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
  const { h, s } = freshStore(makeStore, tmpDir, 'state-versions');
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

module.exports = { checkChangesSince, checkStateVersions };
