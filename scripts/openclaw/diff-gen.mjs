// The generator of the differential test: seeded random sequences of calls to OpenClaw's
// session-state API over a fixed set of sessions.
//
// What is generated stays inside what both sides promise alike: the differences kept on
// purpose, and which of them are kept out of generation, are listed with their reasons in
// diff-compare.mjs (DIFFERENCES), the one place they are handled.

import { DIFFERENCES } from './diff-compare.mjs'

const M = 'agent:main:main'
const S1 = 'agent:main:subagent:a'
const S2 = 'agent:main:subagent:b'
const G = 'agent:main:group:g1'
const C = 'agent:main:channel:c1'
const D = 'agent:main:direct:d1'
const O = 'agent:ops:main'
const OS = 'agent:ops:subagent:c'
const OG = 'agent:ops:group:g2'
const X = 'agent:main:subagent:ghost'

/** Every session of the test. */
export const KEYS = [M, S1, S2, G, C, D, O, OS, OG, X]

/** The session entries both sides create through OpenClaw's session store (X has none). */
export const ENTRIES = {
  [M]: { sessionId: 'sid-m' },
  [S1]: { sessionId: 'sid-s1', spawnedBy: M },
  [S2]: { sessionId: 'sid-s2', spawnedBy: S1 },
  [G]: { sessionId: 'sid-g', chatType: 'group' },
  [C]: { sessionId: 'sid-c', chatType: 'channel' },
  [D]: { sessionId: 'sid-d' },
  [O]: { sessionId: 'sid-o' },
  [OS]: { sessionId: 'sid-os', spawnedBy: O },
  [OG]: { sessionId: 'sid-og', chatType: 'group' },
}

const KINDS = [
  'human_direct_message',
  'goal_changed',
  'upstream_missing',
  'child_spawned',
  'run_completed',
  'run_failed',
  'compacted',
  'adopted',
  'created',
]
const DAY = 86_400_000
const HOUR = 3_600_000

/** A small, fast PRNG (mulberry32) seeded from two integers. */
export function rng(seed, index) {
  let a = (Math.imul(seed ^ 0x9e3779b9, 0x85ebca6b) ^ Math.imul(index + 1, 0xc2b2ae35)) >>> 0
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  const int = (n) => Math.floor(next() * n)
  const pick = (list) => list[int(list.length)]
  const chance = (p) => next() < p
  return { next, int, pick, chance }
}

const agentOf = (key) => key.split(':')[1]

/** One call of OpenClaw's upstream-link functions. */
function linkOp(r, key) {
  const s = key()
  const agentId = agentOf(s)
  const w = r.int(10)
  if (w < 4) {
    const remote = r.chance(0.5)
    const input = {
      sessionKey: s,
      agentId,
      catalogId: r.pick(['claude', 'codex']),
      hostId: remote ? `node:${r.pick(['n1', 'n2'])}` : 'gateway:local',
      threadId: `thread-${r.int(3)}`,
      upstreamKind: 'claude-cli',
      upstreamRef: remote ? { nodeId: 'n1', threadId: `thread-${r.int(3)}` } : { filePath: `/t/${r.int(3)}.jsonl` },
      marker: r.pick([null, { offset: r.int(5000) }, { uuid: `u-${r.int(3)}` }]),
    }
    return { fn: 'upsertSessionUpstreamLink', args: [input], opts: r.chance(0.3) ? { ifAbsent: true } : {} }
  }
  if (w < 6) return { fn: 'readSessionUpstreamLink', args: [s, agentId] }
  if (w < 8) return { fn: 'updateSessionUpstreamLinkMarker', args: [s, agentId, { offset: r.int(9000) }], opts: {} }
  if (w < 9) return { fn: 'deleteSessionUpstreamLink', args: [s, agentId], expected: r.pick([undefined, 'current', 'stale']) }
  return { fn: 'listWatchedSessionUpstreamLinks', args: [] }
}

/** The ops of sequence `index` of run `seed`, starting at epoch ms `start`. */
export function sequence(seed, index, start, length) {
  const r = rng(seed, index)
  let now = start
  const ops = []
  const focus = r.pick([S1, G, S2, OS, D])
  const key = () => (r.chance(0.4) ? focus : r.pick(KEYS))
  const watcherList = () => {
    const n = r.pick([0, 1, 1, 1, 2, 3])
    return Array.from({ length: n }, () => (r.chance(0.6) ? r.pick([M, S1, O]) : r.pick(KEYS)))
  }
  const payload = () => (r.chance(0.3) ? { n: r.int(5), tag: r.pick(['a', 'b']) } : r.chance(0.1) ? {} : undefined)
  const pool = (name, n) => `${name}-${r.int(n)}`
  const steps = length ?? 4 + r.int(14)
  for (let i = 0; i < steps; i++) {
    const w = r.int(100)
    let op
    if (r.chance(0.08)) {
      op = linkOp(r, key)
    } else if (w < 8) {
      const jump = r.pick([60_000, HOUR + 1, 5 * HOUR, DAY, 10 * DAY, 29 * DAY, 30 * DAY, 31 * DAY])
      now += jump
      continue
    } else if (w < 26) {
      const target = key()
      const input = {
        sessionKey: target,
        agentId: agentOf(target),
        kind: r.pick(KINDS),
        actorType: r.pick(['human', 'agent', 'system']),
        summary: `change ${r.int(100)}`,
      }
      if (r.chance(0.3)) input.actorId = r.chance(0.6) ? r.pick([M, S1, O, focus]) : 'human:alice'
      if (r.chance(0.3)) input.runId = pool('run', 4)
      if (r.chance(0.3)) input.sessionId = pool('sid', 3)
      if (r.chance(0.3)) input.dedupeKey = pool('dedupe', 4)
      const p = payload()
      if (p) input.payload = p
      if (r.chance(0.2)) input.occurredAt = now - r.int(2 * DAY)
      let watchers = watcherList()
      if (DIFFERENCES.targetAsOwnWatcher.excluded) watchers = watchers.filter((k) => k !== target)
      if (watchers.length) input.watcherSessionKeys = watchers
      op = { fn: 'recordSessionStateEvent', args: [input] }
    } else if (w < 32) {
      const parent = r.pick([M, S1, O])
      let child = r.pick([S1, S2, OS, X, D])
      if (DIFFERENCES.targetAsOwnWatcher.excluded && child === parent) child = S2
      op = {
        fn: 'recordSubagentSpawned',
        args: [{ childSessionKey: child, agentId: agentOf(child), requesterSessionKey: parent, childRunId: pool('run', 4) }],
      }
    } else if (w < 35) {
      op = {
        fn: 'recordSubagentTerminalState',
        args: [
          {
            childSessionKey: r.pick([S1, S2, OS]),
            requesterSessionKey: r.pick([M, S1, O]),
            runId: pool('run', 4),
            outcomeStatus: r.pick(['ok', 'error', 'timeout', 'cancelled']),
          },
        ],
      }
    } else if (w < 37) {
      const s = key()
      op = { fn: 'recordSessionCompacted', args: [{ sessionKey: s, operationId: pool('op', 3), ...(r.chance(0.5) ? { agentId: agentOf(s) } : {}), ...(r.chance(0.5) ? { runId: pool('run', 4) } : {}) }] }
    } else if (w < 39) {
      const s = key()
      const entry = { sessionId: pool('sid', 3) }
      if (r.chance(0.6)) entry.spawnedBy = r.pick([M, S1, O])
      else if (r.chance(0.5)) entry.parentSessionKey = r.pick([M, O])
      if (DIFFERENCES.targetAsOwnWatcher.excluded && (entry.spawnedBy === s || entry.parentSessionKey === s)) {
        delete entry.spawnedBy
        delete entry.parentSessionKey
      }
      const params = { sessionKey: s, entry, summary: `goal ${r.int(10)}` }
      if (r.chance(0.4)) params.actor = { type: r.pick(['human', 'agent']), ...(r.chance(0.6) ? { id: r.pick([M, S1, 'human:bob']) } : {}) }
      op = { fn: 'recordSessionGoalChanged', args: [params] }
    } else if (w < 52) {
      const s = key()
      const params = {
        sessionKey: s,
        actor: { actorType: r.chance(0.85) ? 'human' : 'agent', ...(r.chance(0.5) ? { actorId: r.pick(['human:alice', M, S1]) } : {}) },
      }
      if (r.chance(0.6)) params.entry = ENTRIES[s] ?? { sessionId: 'sid-x', spawnedBy: M }
      if (r.chance(0.5)) params.channel = r.pick(['telegram', ' slack ', ''])
      if (r.chance(0.3)) params.dedupeKey = pool('hdm', 3)
      if (r.chance(0.3)) params.runId = pool('run', 4)
      const p = payload()
      if (p) params.payload = p
      if (r.chance(0.2)) params.occurredAt = now - r.int(2 * DAY)
      op = { fn: 'recordSessionHumanDirectMessage', args: [params] }
    } else if (w < 59) {
      op = { fn: 'registerSessionStateWatch', args: [{ watcherSessionKey: r.pick([M, S1, O, ...KEYS]), targetSessionKey: key() }] }
    } else if (w < 63) {
      const s = r.pick([G, C, OG, D, M])
      const agentId = agentOf(s)
      op = { fn: 'registerMainSessionGroupWatch', args: [{ sessionKey: s, entry: ENTRIES[s], agentId }] }
    } else if (w < 70) {
      // A turn takes the queued events and acknowledges them (OpenClaw's reply path), or ends
      // before acknowledging (the events are gone from the queue, the cursors still pending).
      op = { fn: r.chance(0.3) ? 'dropQueue' : 'drainAndAcknowledge', args: [r.pick([M, S1, O, M, ...KEYS])] }
    } else if (w < 74) {
      const targets = Array.from({ length: 1 + r.int(3) }, () => key())
      op = { fn: 'acknowledgeSessionStateNotices', args: [r.pick([M, S1, O, ...KEYS]), targets] }
    } else if (w < 77) {
      op = { fn: 'sweepSessionStateWatchNotices', args: [] }
    } else if (w < 79) {
      ops.push({ fn: 'restart', args: [], now })
      op = { fn: 'sweepSessionStateWatchNotices', args: [] }
    } else if (w < 81) {
      op = { fn: 'handleSessionStateSessionReset', args: [r.pick(KEYS)] }
    } else if (w < 83) {
      const s = r.pick(KEYS)
      op = { fn: 'handleSessionStateSessionDeleted', args: [s, agentOf(s)] }
    } else if (w < 89) {
      const s = key()
      const after = r.pick([0, 0, 1, 2, 3, 5, -1])
      const limit = r.pick([undefined, 1, 2, 200])
      op = { fn: 'listSessionStateEventsSince', args: [s, agentOf(s), after, limit] }
    } else if (w < 92) {
      const s = key()
      op = { fn: 'getSessionStateVersion', args: [s, agentOf(s)] }
    } else if (w < 94) {
      op = { fn: 'getSessionStateVersions', args: [Array.from({ length: 1 + r.int(4) }, () => ({ sessionKey: r.pick(KEYS) }))] }
    } else if (w < 96) {
      op = { fn: 'listAmbientGroupWatchTargets', args: [r.pick([M, O, S1])] }
    } else if (w < 98) {
      // OpenClaw's chunk exports neither pruneSessionStateEvents nor hasSessionStateWatchers:
      // records and sweeps prune, and human messages ask who watches.
      op = { fn: 'listAmbientGroupWatchTargets', args: [r.pick([M, O])] }
    } else {
      op = {
        fn: 'classifySessionStateActor',
        args: [
          r.pick([
            {},
            { inputProvenance: { kind: 'inter_session', sourceSessionKey: S1 } },
            { inputProvenance: { kind: 'inter_session' } },
            { inputProvenance: { kind: 'internal_system' } },
            { internalEvents: [1] },
            { sessionEffects: 'internal', humanActorId: 'h' },
            { humanActorId: 'human:alice' },
          ]),
        ],
      }
    }
    op.now = now
    ops.push(op)
    now += 1 + r.int(1000)
  }
  return ops
}
