'use strict';
// What the benchmarks record and how their child processes talk to their parent: the one
// message every workload writes (a human's message in a subagent's session, with the watchers
// it names), the clock they stamp with, and the IPC send that stops once the parent is gone.

/** Ms since the epoch, with sub-ms precision, comparable across processes. */
const now = () => performance.timeOrigin + performance.now();

/** Sends `msg` to the parent process while it is connected. */
const send = (msg) => process.connected && process.send(msg);

/** A human's message `n` to `sessionKey`; `watchers` when given. */
const humanMessage = (sessionKey, n, watchers) => ({
  sessionKey,
  kind: 'human_direct_message',
  actorType: 'human',
  actorId: 'telegram:42',
  summary: `human message via telegram ${n}`,
  payload: { channel: 'telegram' },
  ...(watchers ? { watchers } : {}),
});

module.exports = { now, send, humanMessage };
