// The script both Promise API suites run (async.test.ts on two SQLite files,
// postgres/promise-api.test.ts on a SQLite reference and a store of each kind): every
// synchronous call beside its Promise twin, and the keys it uses.
import * as fs from 'node:fs'

import { human, must, type CodedError, type SessionState } from './helpers'

/** The watcher of the script. */
export const MAIN = 'agent:main:main'
/** The first target. */
export const CHILD = 'agent:main:subagent:c'
/** The second target, watched as an ambient group. */
export const OTHER = 'agent:main:subagent:d'
/** The adopted session. */
export const ADOPTED = 'agent:main:adopted'
/** The session adopted from a local transcript. */
export const LOCAL = 'agent:main:local'

/** A transcript line of a turn typed by a human. */
export const typed = (text: string) => `${JSON.stringify({ type: 'user', message: { role: 'user', content: text } })}\n`

/** An upstream transcript item. */
export const item = (uuid: string, text: string) => ({ uuid, type: 'user', message: { role: 'user', content: text } })

/** The code a promise rejects with; fails the test when it resolves. */
export async function rejection(p: Promise<unknown>): Promise<string> {
  try {
    await p
  } catch (e) {
    return (e as CodedError).code
  }
  throw new Error('expected a rejection')
}

/** One step: its name, the synchronous call, and its Promise twin. */
export type Step = [string, (s: SessionState) => unknown, (s: SessionState) => Promise<unknown>]

/** The steps that read the cursor rows (postgres/promise-api.test.ts runs them, async.test.ts not). */
export const CURSOR_ROW_STEPS = new Set(['cursorRows', 'cursorRows of a target'])

/**
 * The whole script; `payload` is the payload of the step 'record other'. With `transcript` (a
 * local transcript both stores share), the script also adopts it, notes the gateway's own
 * message and scans it.
 */
export function promiseSteps(payload: Record<string, unknown>, transcript?: string): Step[] {
  const local: Step[] =
    transcript === undefined
      ? []
      : [
          ['adopt local', (s) => s.adopt(LOCAL, { source: 'claude', transcriptPath: transcript }), (s) => s.adoptAsync(LOCAL, { source: 'claude', transcriptPath: transcript })],
          ['watch local', (s) => s.watch(MAIN, LOCAL), (s) => s.watchAsync(MAIN, LOCAL)],
          ['noteOwnUserMessage', (s) => s.noteOwnUserMessage(LOCAL, 'sent by the gateway'), (s) => s.noteOwnUserMessageAsync(LOCAL, 'sent by the gateway')],
          [
            'scanUpstream',
            (s) => {
              // Both stores scan the same bytes: appended once, before the reference's scan.
              fs.appendFileSync(transcript, typed('typed in the terminal') + typed('sent by the gateway'))
              return s.scanUpstream()
            },
            (s) => s.scanUpstreamAsync(),
          ],
          ['scanUpstream nothing new', (s) => s.scanUpstream(), (s) => s.scanUpstreamAsync()],
        ]
  return [
    ['watch', (s) => s.watch(MAIN, CHILD), (s) => s.watchAsync(MAIN, CHILD)],
    ['watch ambient', (s) => s.watch(MAIN, OTHER, { provenance: 'ambient-group' }), (s) => s.watchAsync(MAIN, OTHER, { provenance: 'ambient-group' })],
    ['record', (s) => s.record(human(CHILD)), (s) => s.recordAsync(human(CHILD))],
    ['record deduped', (s) => s.record(human(CHILD, { dedupeKey: 'k' })), (s) => s.recordAsync(human(CHILD, { dedupeKey: 'k' }))],
    ['record repeat', (s) => s.record(human(CHILD, { dedupeKey: 'k' })), (s) => s.recordAsync(human(CHILD, { dedupeKey: 'k' }))],
    ['record unwatched', (s) => s.record(human('agent:main:x', { onlyIfWatched: true })), (s) => s.recordAsync(human('agent:main:x', { onlyIfWatched: true }))],
    ['record other', (s) => s.record(human(OTHER, { payload })), (s) => s.recordAsync(human(OTHER, { payload }))],
    ['peek', (s) => s.peek(MAIN), async (s) => s.peek(MAIN)],
    ['acknowledge', (s) => s.acknowledge(MAIN, [CHILD, CHILD]), (s) => s.acknowledgeAsync(MAIN, [CHILD, CHILD])],
    ['cursorRows', (s) => s.cursorRows(), (s) => s.cursorRowsAsync()],
    ['cursorRows of a target', (s) => s.cursorRows({ targetKey: CHILD }), (s) => s.cursorRowsAsync({ targetKey: CHILD })],
    ['changesSince', (s) => s.changesSince(CHILD, 0), (s) => s.changesSinceAsync(CHILD, 0)],
    ['changesSince limit', (s) => s.changesSince(CHILD, 0, { limit: 1 }), (s) => s.changesSinceAsync(CHILD, 0, { limit: 1 })],
    [
      'stateVersions',
      (s) => s.stateVersions([{ sessionKey: CHILD }, { sessionKey: MAIN }, { sessionKey: OTHER }]),
      (s) => s.stateVersionsAsync([{ sessionKey: CHILD }, { sessionKey: MAIN }, { sessionKey: OTHER }]),
    ],
    ['record again', (s) => s.record(human(CHILD)), (s) => s.recordAsync(human(CHILD))],
    ['drain reopened', (s) => s.drain(MAIN), (s) => s.drainAsync(MAIN)],
    ['record after drain', (s) => s.record(human(CHILD)), (s) => s.recordAsync(human(CHILD))],
    ['sweep', (s) => s.sweep(), (s) => s.sweepAsync()],
    ['sweep asking', (s) => s.sweep({ watcherExists: (w) => w !== MAIN }), (s) => s.sweepAsync({ watcherExists: (w) => w !== MAIN })],
    ['prune', (s) => s.prune(), (s) => s.pruneAsync()],
    ['drain', (s) => s.drain(MAIN), (s) => s.drainAsync(MAIN)],
    ['drain empty', (s) => s.drain(MAIN), (s) => s.drainAsync(MAIN)],
    ['unwatch', (s) => s.unwatch(MAIN, OTHER), (s) => s.unwatchAsync(MAIN, OTHER)],
    ['unwatch again', (s) => s.unwatch(MAIN, OTHER), (s) => s.unwatchAsync(MAIN, OTHER)],
    ['adopt', (s) => s.adopt(ADOPTED, { source: 'claude', remoteId: 'node-1:abc' }), (s) => s.adoptAsync(ADOPTED, { source: 'claude', remoteId: 'node-1:abc' })],
    ['watch adopted', (s) => s.watch(MAIN, ADOPTED), (s) => s.watchAsync(MAIN, ADOPTED)],
    [
      'checkUpstream baseline',
      (s) => s.checkUpstream(ADOPTED, { found: true, items: [item('a', 'old')] }),
      (s) => s.checkUpstreamAsync(ADOPTED, { found: true, items: [item('a', 'old')] }),
    ],
    [
      'checkUpstream new',
      (s) => s.checkUpstream(ADOPTED, { found: true, items: [item('a', 'old'), item('b', 'new')] }),
      (s) => s.checkUpstreamAsync(ADOPTED, { found: true, items: [item('a', 'old'), item('b', 'new')] }),
    ],
    ...local,
    ['resetSession', (s) => s.resetSession(MAIN), (s) => s.resetSessionAsync(MAIN)],
    ['peek after reset', (s) => s.peek(MAIN), async (s) => s.peek(MAIN)],
    ['deleteSession', (s) => s.deleteSession(CHILD), (s) => s.deleteSessionAsync(CHILD)],
    ['changesSince deleted', (s) => s.changesSince(CHILD, 0), (s) => s.changesSinceAsync(CHILD, 0)],
  ]
}

/**
 * Runs `steps` in order, each synchronous call on `sync` and its twin on `promised`, calling
 * `advance` after each (to move the stores' clock). Returns what each side gave, by step, and `of`,
 * the synchronous result of a step by name.
 */
export async function runSteps(steps: Step[], sync: SessionState, promised: SessionState, advance: () => void) {
  const got: Array<[string, unknown]> = []
  const want: Array<[string, unknown]> = []
  for (const [name, call, twin] of steps) {
    want.push([name, call(sync)])
    got.push([name, await twin(promised)])
    advance()
  }
  const of = (name: string) => want.find(([n]) => n === name)?.[1]
  return { got, want, of }
}

/** The pending notices as (target, changesSince). */
export const pairs = (ns: Array<{ targetKey: string; changesSince: number }>) => ns.map((n) => [n.targetKey, n.changesSince])

/**
 * The script reached every kind of result: `of` is what {@link runSteps} returns; `upstream`
 * when the script ran its adopted-session steps.
 */
export function expectReached(of: (name: string) => unknown, upstream: boolean): void {
  expect(of('watch')).toBe(true)
  expect(of('record repeat')).toEqual(of('record deduped'))
  expect(of('record unwatched')).toBeNull()
  expect(of('acknowledge')).toBe(1)
  expect(of('stateVersions')).toEqual([
    { sessionKey: CHILD, agentId: 'main', stateVersion: 2 },
    { sessionKey: OTHER, agentId: 'main', stateVersion: 4 },
  ])
  expect(of('sweep')).toEqual({ notices: 1, prune: { eventsDeleted: 0, cursorsDeleted: 0 } })
  if (upstream) expect(of('checkUpstream new')).toMatchObject({ kind: 'human_direct_message', payload: { turns: 1 } })
  expect(of('unwatch again')).toBe(false)
  expect(pairs(of('drain reopened') as never)).toEqual([
    [OTHER, 0],
    [CHILD, 1],
  ])
  expect(of('drain empty')).toEqual([])
  expect(of('deleteSession')).toBeUndefined()
}

/**
 * 64 records through the Promise API, alternating between {@link OTHER} and {@link CHILD}
 * (CHILD watched by the caller): they settle in call order with the sequences 1 to 64.
 */
export async function recordsSettleInOrder(s: SessionState): Promise<void> {
  const order: number[] = []
  const all = Array.from({ length: 64 }, (_, i) =>
    s.recordAsync(human(i % 2 ? CHILD : OTHER)).then((e) => {
      order.push(must(e).sequence)
      return must(e).sequence
    }),
  )
  const seqs = await Promise.all(all)
  expect(seqs).toEqual(Array.from({ length: 64 }, (_, i) => i + 1))
  expect(order).toEqual(seqs)
}
