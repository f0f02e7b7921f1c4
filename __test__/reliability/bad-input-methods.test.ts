// Bad input, every method but record: each parameter × every bad value of the matrix.
// Accepted values are listed with their exact result; everything else is ERR_INVALID_ARG and
// changes nothing stored.
import * as fs from 'node:fs'
import * as path from 'node:path'

import { SessionState, decodeNoticeContextKey, encodeNoticeContextKey } from '../../lib'
import { LONE_STORED, MIB, QUOTED, T, W, matrix, type Param } from './bad-values'
import { codeOf, tempDir } from './support'

/** The store with its methods callable with any arguments. */
const loose = (s: SessionState) => s as unknown as Record<'prune' | 'close', (...args: unknown[]) => unknown>

const hex = (s: string) => Buffer.from(s, 'utf8').toString('hex')

/** Results of the few calls below that accept a value; all other values are refused. */
const noEvents = { stateVersion: 0, stateChanges: { events: [], truncated: false, earliestAvailableSequence: 0, historyGap: false } }
/** changesSince(T, 0) on a seeded store: the target's two events. */
function tEvents(limit: number) {
  return (r: unknown) => {
    const c = r as { stateVersion: number; stateChanges: { events: Array<{ sequence: number }>; truncated: boolean } }
    expect(c.stateVersion).toBe(2)
    expect(c.stateChanges.events.map((e) => e.sequence)).toEqual([1, 2].slice(0, limit))
    expect(c.stateChanges.truncated).toBe(limit < 2)
  }
}
/** The pending notice of W on T, untouched. */
const stillPending = (_r: unknown, s: SessionState) => expect(s.peek(W).map((n) => n.changesSince)).toEqual([1])
const sweepReport = { notices: 1, prune: { eventsDeleted: 0, cursorsDeleted: 0 } }

/** A required session key: a lone surrogate and quotes or newlines are fine, nothing else. */
function keyParam(call: string, run: Param['run'], lone: unknown, quoted: unknown): Param {
  return { call, run, ok: { lone, quoted } }
}

const params: Param[] = [
  keyParam('watch(watcherKey)', (s, v) => s.watch(v as string, T), true, true),
  keyParam('watch(targetKey)', (s, v) => s.watch(W, v as string), true, true),
  {
    call: 'watch(options)',
    run: (s, v) => s.watch(W, 'agent:main:subagent:other', v as never),
    ok: { ...{ undefined: true, null: true }, object: true },
  },
  { call: 'watch({provenance})', run: (s, v) => s.watch(W, T, { provenance: v as never }), ok: { undefined: true, null: true } },
  keyParam('unwatch(watcherKey)', (s, v) => s.unwatch(v as string, T), false, false),
  keyParam('unwatch(targetKey)', (s, v) => s.unwatch(W, v as string), false, false),
  keyParam('stateVersion(sessionKey)', (s, v) => s.stateVersion(v as string), 0, 0),
  { call: 'stateVersion(options)', run: (s, v) => s.stateVersion(T, v as never), ok: { undefined: 2, null: 2, object: 2 } },
  { call: 'stateVersion(agentId)', run: (s, v) => s.stateVersion(T, { agentId: v as string }), ok: { undefined: 2, null: 2 } },
  { call: 'stateVersions(refs)', run: (s, v) => s.stateVersions(v as never), ok: {} },
  { call: 'stateVersions([ref])', run: (s, v) => s.stateVersions([v as never]), ok: {} },
  keyParam('stateVersions([{sessionKey}])', (s, v) => s.stateVersions([{ sessionKey: v as string }]), [], []),
  {
    call: 'stateVersions([{agentId}])',
    run: (s, v) => s.stateVersions([{ sessionKey: T, agentId: v as string }]),
    ok: { undefined: [{ sessionKey: T, agentId: 'main', stateVersion: 2 }], null: [{ sessionKey: T, agentId: 'main', stateVersion: 2 }] },
  },
  keyParam('changesSince(sessionKey)', (s, v) => s.changesSince(v as string, 0), noEvents, noEvents),
  {
    call: 'changesSince(after)',
    run: (s, v) => s.changesSince(T, v as number),
    // Only a non-negative safe integer: 42 is one (nothing after it yet).
    ok: { number: { stateVersion: 2, stateChanges: { events: [], truncated: false, earliestAvailableSequence: 1, historyGap: false } } },
  },
  {
    call: 'changesSince(options)',
    run: (s, v) => s.changesSince(T, 0, v as never),
    ok: { undefined: tEvents(2), null: tEvents(2), object: tEvents(2) },
  },
  {
    call: 'changesSince({limit})',
    run: (s, v) => s.changesSince(T, 0, { limit: v as number }),
    // Documented clamps: floor, then [1, 200].
    ok: { undefined: tEvents(2), null: tEvents(2), number: tEvents(2), neg: tEvents(1), big: tEvents(2) },
  },
  { call: 'changesSince({agentId})', run: (s, v) => s.changesSince(T, 0, { agentId: v as string }), ok: { undefined: tEvents(2), null: tEvents(2) } },
  keyParam('drain(watcherKey)', (s, v) => s.drain(v as string), [], []),
  keyParam('peek(watcherKey)', (s, v) => s.peek(v as string), [], []),
  keyParam('acknowledge(watcherKey)', (s, v) => s.acknowledge(v as string, [T]), 0, 0),
  // ['x'] is a list of one bare key: nothing to acknowledge.
  { call: 'acknowledge(targetKeys)', run: (s, v) => s.acknowledge(W, v as string[]), ok: { array: 0 } },
  keyParam('acknowledge([targetKey])', (s, v) => s.acknowledge(W, [v as string]), 0, 0),
  {
    call: 'sweep(options)',
    run: (s, v) => s.sweep(v as never),
    ok: { undefined: sweepReport, null: sweepReport, object: sweepReport },
  },
  {
    call: 'sweep({watcherExists})',
    run: (s, v) => s.sweep({ watcherExists: v as never }),
    // The function of the matrix returns 'x', not a boolean: a watcherExists that cannot
    // answer is refused too (a proper one is covered by the sweep tests).
    ok: { undefined: sweepReport, null: sweepReport },
  },
  keyParam('resetSession(sessionKey)', (s, v) => s.resetSession(v as string), stillPending, stillPending),
  keyParam('deleteSession(sessionKey)', (s, v) => s.deleteSession(v as string), stillPending, stillPending),
  { call: 'deleteSession(options)', run: (s, v) => s.deleteSession('agent:main:subagent:gone', v as never), ok: { undefined: stillPending, null: stillPending, object: stillPending } },
  { call: 'deleteSession(agentId)', run: (s, v) => s.deleteSession('agent:main:subagent:gone', { agentId: v as string }), ok: { undefined: stillPending, null: stillPending } },
  keyParam('noteOwnUserMessage(sessionKey)', (s, v) => s.noteOwnUserMessage(v as string, 'hi'), undefined, undefined),
  {
    call: 'noteOwnUserMessage(text)',
    run: (s, v) => s.noteOwnUserMessage(T, v as string),
    // Any text the gateway sent: a pasted document is a message too.
    ok: { empty: undefined, mib: undefined, lone: undefined, quoted: undefined },
  },
  {
    call: 'startUpstreamMonitor(options)',
    run: (s, v) => s.startUpstreamMonitor(v as never),
    ok: { undefined: undefined, null: undefined, object: undefined },
  },
  {
    call: 'startUpstreamMonitor({intervalMs})',
    run: (s, v) => s.startUpstreamMonitor({ intervalMs: v as number }),
    // A positive integer up to 2^31 - 1.
    ok: { undefined: undefined, null: undefined, number: undefined },
  },
  {
    call: 'encodeNoticeContextKey(targetKey)',
    run: (_s, v) => encodeNoticeContextKey(v as string),
    // A pure function over any string: no length limit, the lone surrogate as U+FFFD.
    ok: {
      empty: 'session-state:',
      mib: `session-state:${'6b'.repeat(MIB.length)}`,
      lone: `session-state:${hex(LONE_STORED)}`,
      quoted: `session-state:${hex(QUOTED)}`,
    },
  },
  {
    call: 'decodeNoticeContextKey(contextKey)',
    run: (_s, v) => decodeNoticeContextKey(v as string),
    ok: { empty: null, mib: null, lone: null, quoted: null },
  },
]

matrix('bad input to the methods', params, 'throws')

test('calls without parameters ignore extra arguments; a closed store refuses everything', () => {
  const dir = tempDir('noarg')
  try {
    const s = new SessionState(path.join(dir, 's.sqlite'))
    expect(loose(s).prune(null, 42)).toEqual({ eventsDeleted: 0, cursorsDeleted: 0 })
    loose(s).close(42)
    loose(s).close()
    for (const call of [() => s.watch(W, T), () => s.drain(W), () => s.peek(W), () => s.stateVersion(T), () => s.sweep()]) {
      expect(codeOf(call)).toBe('ERR_CLOSED')
    }
    // A bad argument to a closed store: the argument is judged first.
    expect(codeOf(() => s.drain(42 as never))).toBe('ERR_INVALID_ARG')
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})
