// A small gateway, simulated end to end on the public API: every moment of the gateway
// integration guide (docs/gateway-guide.md) as the call the gateway makes. `npm test`
// type-checks it and runs it; every expectation is asserted, so a behaviour change fails.
//
//   npx tsc -p examples/tsconfig.json && node .tmp/examples/gateway.js
import { strict as assert } from 'node:assert'
import * as fs from 'node:fs'
import * as os from 'node:os'
import * as path from 'node:path'

import {
  SessionState,
  type ChangesSince,
  type EventKind,
  type Notice,
  type SessionStateOptions,
  type StateEvent,
  type WakeRequest,
} from 'session-awareness'

const MAIN = 'agent:main:main'
const CHILD = 'agent:main:subagent:research'
const OPS = 'agent:ops:main'

/** The slice of a gateway this example needs: sessions, prompts and a heartbeat. */
class Gateway {
  state: SessionState
  readonly sessions = new Set([MAIN, OPS])
  readonly wakes: WakeRequest[] = []
  readonly log: string[] = []

  constructor(readonly dbPath: string) {
    this.state = this.open()
  }

  /** Gateway start: open the store, then sweep to restore notices lost with the process. */
  open(): SessionState {
    const options: SessionStateOptions = {
      // The heartbeat: a real gateway wakes the session's runner; this one records it.
      wake: (req) => this.wakes.push(req),
      wakeCoalesceMs: 10,
      onError: (err) => this.log.push(`session-state ${err.code}: ${err.message}`),
    }
    const state = new SessionState(this.dbPath, options)
    const swept = state.sweep({ watcherExists: (key) => this.sessions.has(key) })
    this.log.push(`gateway start: ${swept.notices} pending notice(s) restored`)
    return state
  }

  restart(): void {
    this.state.close()
    this.state = this.open()
  }

  /** The start of each turn of `sessionKey`: its notices become system lines of the prompt. */
  startTurn(sessionKey: string): string[] {
    const notices: Notice[] = this.state.drain(sessionKey)
    this.log.push(`turn of ${sessionKey}: ${notices.length} notice(s)`)
    for (const n of notices) this.log.push(`  system: ${n.text}`)
    return notices.map((n) => n.text)
  }

  /** sessions_spawn: the child's creation seeds the parent's cursor (no notice). */
  spawnSubagent(parentKey: string, childKey: string, runId: string): void {
    this.sessions.add(childKey)
    this.state.record({
      sessionKey: childKey, kind: 'child_spawned', actorType: 'agent', actorId: parentKey,
      runId, summary: 'sub-agent spawned', watchers: [parentKey],
    })
  }

  /** The end of a child run: log only; the completion announcement stays the gateway's. */
  finishRun(childKey: string, runId: string, outcome: 'ok' | 'cancelled' | 'timeout' | 'error'): void {
    const kind: EventKind = outcome === 'ok' ? 'run_completed' : 'run_failed'
    this.state.record({
      sessionKey: childKey, kind, actorType: 'system', runId,
      summary: outcome === 'ok' ? 'run completed' : `run ${outcome}`,
      payload: outcome === 'ok' ? null : { outcome },
    })
  }

  /**
   * An inbound channel message typed by a human straight into a session. Recorded only when
   * someone watches the session; a redelivery of the same message is deduplicated.
   */
  humanMessage(sessionKey: string, channel: string, messageId: string): StateEvent | null {
    return this.state.record({
      sessionKey, kind: 'human_direct_message', actorType: 'human',
      summary: `human message via ${channel}`, dedupeKey: `${channel}:${messageId}`,
      onlyIfWatched: true,
    })
  }

  /** A goal created, updated or cleared; `editorKey` is the session that edited it, if any. */
  editGoal(sessionKey: string, editorKey?: string): StateEvent | null {
    return this.state.record({
      sessionKey, kind: 'goal_changed', actorType: editorKey ? 'agent' : 'human',
      actorId: editorKey, summary: 'goal updated',
    })
  }

  /** Compaction of a session's history: log only. */
  compacted(sessionKey: string): void {
    this.state.record({ sessionKey, kind: 'compacted', actorType: 'system', summary: 'history compacted' })
  }

  /** Tool sessions_send with `watch: true`, after the message was delivered to `targetKey`. */
  sessionsSend(senderKey: string, targetKey: string, watch: boolean): { watched?: boolean } {
    return watch ? { watched: this.state.watch(senderKey, targetKey) } : {}
  }

  /**
   * Tool session_status: always the state version; the delta when `changesSince` is given,
   * after which the calling session has read the target up to the last event returned.
   */
  sessionStatus(callerKey: string, sessionKey: string, changesSince?: number): ChangesSince | { stateVersion: number } {
    if (changesSince === undefined) return { stateVersion: this.state.stateVersion(sessionKey) }
    const delta = this.state.changesSince(sessionKey, changesSince)
    const read = delta.stateChanges.events.at(-1)?.sequence
    // What the agent has read is not notified again: one notice and one wake per burst.
    if (read !== undefined) this.state.acknowledge(callerKey, [sessionKey], { through: read })
    return delta
  }

  /** Tool sessions_list: rows carry `stateVersion` when the session has logged changes. */
  sessionsList(): Array<{ key: string; stateVersion?: number }> {
    const keys = [...this.sessions].sort()
    const versions = new Map(
      this.state.stateVersions(keys.map((sessionKey) => ({ sessionKey })))
        .map((v) => [v.sessionKey, v.stateVersion]),
    )
    return keys.map((key) => (versions.has(key) ? { key, stateVersion: versions.get(key) } : { key }))
  }

  /** /reset of a session, and deletion of a session. */
  reset(sessionKey: string): void {
    this.state.resetSession(sessionKey)
  }

  delete(sessionKey: string): void {
    this.sessions.delete(sessionKey)
    this.state.deleteSession(sessionKey)
  }
}

/** Waits for the heartbeat: wakes are delivered on the event loop, shortly after the record. */
async function nextWake(gw: Gateway): Promise<WakeRequest> {
  for (let i = 0; i < 1000 && gw.wakes.length === 0; i++) {
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
  const wake = gw.wakes.shift()
  assert.ok(wake, 'the main session was woken')
  return wake
}

export async function main(): Promise<string[]> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gateway-example-'))
  // The store's own file beside the gateway's database, never that database itself: another
  // SQLite library of this process on it would break the store's locks (ERR_FILE_SHARED).
  const gw = new Gateway(path.join(dir, 'state', 'session-state.sqlite'))
  try {
    gw.spawnSubagent(MAIN, CHILD, 'run-1')
    assert.deepEqual(gw.sessionsSend(MAIN, OPS, true), { watched: true })

    // A human jumps into the child over Telegram, then edits its goal: one notice, one wake.
    const human = gw.humanMessage(CHILD, 'telegram', 'm-1')
    assert.equal(gw.humanMessage(CHILD, 'telegram', 'm-1')?.sequence, human?.sequence)
    const goal = gw.editGoal(CHILD)
    assert.ok(human && goal)
    assert.deepEqual(await nextWake(gw), {
      source: 'session-state', intent: 'immediate', reason: `session-state:${CHILD}`, sessionKey: MAIN,
    })
    const lines = gw.startTurn(MAIN)
    assert.deepEqual(lines, [
      `Session "${CHILD}" changed (other actor). Reconcile before acting: ` +
        `session_status sessionKey "${CHILD}" changesSince 1.`,
    ])

    // The agent follows the notice: session_status with changesSince.
    const status = gw.sessionStatus(MAIN, CHILD, 1) as ChangesSince
    gw.log.push(`session_status ${CHILD} changesSince 1: ${JSON.stringify(status)}`)
    assert.equal(status.stateChanges.historyGap, false)
    assert.deepEqual(
      status.stateChanges.events.map((e) => [e.sequence, e.kind, e.actorType, e.summary]),
      [[human.sequence, 'human_direct_message', 'human', 'human message via telegram'],
        [goal.sequence, 'goal_changed', 'human', 'goal updated']],
    )
    // The goal edit arrived after the notice was queued, so draining reopened one fresh
    // notice for it; the agent has read it already, and session_status acknowledged it
    // through the goal edit: no second notice, no second wake.
    assert.deepEqual(gw.startTurn(MAIN), [])
    assert.deepEqual(gw.wakes, [])

    // Log-only events never notify; the agent's own goal edit of OPS is self-suppressed.
    gw.finishRun(CHILD, 'run-1', 'ok')
    gw.compacted(MAIN)
    gw.editGoal(OPS, MAIN)
    assert.deepEqual(gw.startTurn(MAIN), [])
    const versions = gw.sessionsList()
    assert.deepEqual(versions.map((row) => row.key), [MAIN, CHILD, OPS])
    const [mainV, childV, opsV] = versions.map((row) => row.stateVersion ?? 0)
    assert.ok(goal.sequence < childV && childV < mainV && mainV < opsV, 'one global sequence')
    assert.deepEqual(gw.sessionStatus(MAIN, OPS), { stateVersion: opsV })

    // A human writes to OPS, then the gateway restarts before MAIN's next turn: the start
    // sweep restores the notice from the cursor rows.
    gw.humanMessage(OPS, 'slack', 'm-2')
    gw.restart()
    assert.ok(gw.log.includes('gateway start: 1 pending notice(s) restored'))
    assert.deepEqual(gw.startTurn(MAIN).length, 1)

    // /reset of MAIN drops its watches; deleting the child drops its history.
    gw.reset(MAIN)
    gw.humanMessage(OPS, 'slack', 'm-3')
    assert.deepEqual(gw.startTurn(MAIN), [])
    gw.delete(CHILD)
    assert.deepEqual(gw.sessionStatus(MAIN, CHILD), { stateVersion: 0 })
    assert.deepEqual(gw.log.filter((l) => l.startsWith('session-state ERR')), [])
    return gw.log
  } finally {
    gw.state.close()
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

if (require.main === module) {
  main().then(
    (log) => {
      for (const line of log) console.log(line)
      console.log('gateway example: all expectations held')
    },
    (err: unknown) => {
      console.error(err)
      process.exitCode = 1
    },
  )
}
