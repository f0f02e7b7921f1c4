// The one place where the differential test knows of differences between OpenClaw's module
// and the adapter that stay on purpose. Each is either kept out of the generated calls
// (`excluded`: diff-gen.mjs consults this list) or rewritten before the comparison
// (`normalise`). Anything else that differs fails the sequence. docs/openclaw.md lists the
// same differences for gateway engineers.

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
}

/** Compares one step's observations; returns the differing part, or null. */
export function compareStep(op, a, b) {
  for (const part of ['result', 'state']) {
    if (a[part] !== b[part]) return { part, openclaw: a[part], adapter: b[part] }
  }
  return null
}
