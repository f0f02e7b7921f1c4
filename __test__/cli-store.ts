// The store both command-line suites inspect (cli.test.ts on a file, postgres/cli.test.ts on
// a URL after copying the file's rows), and the way they run the tool.
import { spawnSync } from 'node:child_process'
import * as path from 'node:path'

import { SessionState } from '../lib'

/** The tool's entry point. */
export const CLI = path.join(__dirname, '..', 'bin', 'session-awareness.js')
/** The clock of every record. */
export const T = Date.UTC(2030, 0, 1)
/** The parent: it spawned CHILD and watches OPS as an ambient group. */
export const PARENT = 'agent:main:main'
/** The spawned child. */
export const CHILD = 'agent:main:subagent:c'
/** A session of another agent. */
export const OPS = 'agent:ops:main'

/** Runs the tool with `args`; its exit status and output. */
export function cli(...args: string[]) {
  const out = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', timeout: 60_000 })
  return { status: out.status, stdout: out.stdout, stderr: out.stderr }
}

/**
 * Writes the suites' store at `file` (sequences 1 to 4): CHILD spawned by PARENT, a human
 * message to CHILD with `payload`, OPS watched by PARENT and its goal changed, a `global` event.
 */
export function writeCliStore(file: string, payload: Record<string, unknown>): void {
  const state = new SessionState(file, { clock: () => T, strict: true })
  state.record({
    sessionKey: CHILD, kind: 'child_spawned', actorType: 'agent', actorId: PARENT,
    runId: 'run-1', summary: 'child spawned', watchers: [PARENT],
  })
  state.record({
    sessionKey: CHILD, kind: 'human_direct_message', actorType: 'human',
    summary: 'human message via telegram', payload,
  })
  expect(state.watch(PARENT, OPS, { provenance: 'ambient-group' })).toBe(true)
  state.record({ sessionKey: OPS, kind: 'goal_changed', actorType: 'human', summary: 'goal edited' })
  state.record({ sessionKey: 'global', kind: 'created', actorType: 'system', summary: 'global' })
  state.close()
}
