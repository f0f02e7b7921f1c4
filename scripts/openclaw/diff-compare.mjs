// The one place where the differential test knows of differences between OpenClaw's module
// and the adapter that stay on purpose. Each is either kept out of the generated calls
// (`excluded`: diff-gen.mjs never builds such a call; where a random choice could, it checks
// this list) or normalised before the comparison (`normalise`, applied in compareSequence).
// Anything else that differs fails the sequence. docs/openclaw.md lists the same differences
// for gateway engineers.

export const DIFFERENCES = {
  quotedKeys: {
    excluded: true,
    why:
      'The notice text quotes keys as JSON literals (OpenClaw pastes them between plain quotes): ' +
      'the same bytes for keys without quotes, backslashes or control characters, which are the only keys generated.',
  },
  summaryAndPayload: {
    excluded: true,
    why:
      'The store keeps a summary to one line of 240 characters and refuses a payload over 4 KiB ' +
      '(OpenClaw stores either as given): summaries are short single lines, payloads small.',
  },
  fractionalOccurredAt: {
    excluded: true,
    why: "The store floors a fractional occurredAt; OpenClaw's STRICT table refuses it and the record fails. Only integers are generated.",
  },
  foreignAgent: {
    excluded: true,
    why:
      "The store refuses an agent id other than a qualified key's own (OpenClaw files the event under it), and OpenClaw " +
      'throws from recordSessionCompacted for a bare key without an agent (the adapter never throws). Every key is ' +
      'agent-qualified and used with its own agent.',
  },
  targetAsOwnWatcher: {
    excluded: true,
    why:
      'A producer naming the target itself among the watchers: OpenClaw creates a cursor of the session on itself and ' +
      'notifies the session of its own change; the store drops the target from the watcher list (a cursor needs two ' +
      'distinct sessions).',
  },

  sweepOrder: {
    normalise: true,
    why:
      "The order in which a sweep re-queues one watcher's notices: OpenClaw's follows the cursor table's storage " +
      'order (its query has no ORDER BY), the store re-queues in ascending N, then watcher, then target ' +
      '(semantics.md#cursors-sweep). From a sweep on, each watcher\'s queue is compared as a sorted list.',
  },
}

/** A step's state with every watcher's queue sorted (sweepOrder). */
function sortedQueues(state) {
  const s = JSON.parse(state)
  for (const key of Object.keys(s.queues)) s.queues[key].sort((x, y) => (JSON.stringify(x) < JSON.stringify(y) ? -1 : 1))
  return JSON.stringify(s)
}

/**
 * Compares a sequence's observations step by step; returns the first difference
 * ({ step, part, openclaw, adapter }) or null.
 */
export function compareSequence(ops, a, b) {
  let swept = false
  for (let i = 0; i < ops.length; i++) {
    if (DIFFERENCES.sweepOrder.normalise && ops[i].fn === 'sweepSessionStateWatchNotices') swept = true
    const x = a.steps[i]
    const y = b.steps[i]
    if (x.result !== y.result) return { step: i, part: 'result', openclaw: x.result, adapter: y.result }
    const sx = swept ? sortedQueues(x.state) : x.state
    const sy = swept ? sortedQueues(y.state) : y.state
    if (sx !== sy) return { step: i, part: 'state', openclaw: x.state, adapter: y.state }
  }
  if (a.final !== b.final) return { step: 'final', part: 'events', openclaw: a.final, adapter: b.final }
  return null
}
