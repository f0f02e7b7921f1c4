// `npm run bench:openclaw-floor` (node24 bench/openclaw/floor.mjs): for the reads where the addon is furthest from 5× OpenClaw,
// the same reads as bare SQL through Node 24's own SQLite binding (`node:sqlite`, statements
// prepared once, rows returned as objects): the least any implementation on SQLite pays to hand
// the rows to JavaScript. Prints, per read, the medians of alternating rounds for OpenClaw,
// the addon and the bare SQL, and OpenClaw / bare SQL: the most any such implementation could
// gain on OpenClaw. The same for prune. Not part of `npm run bench`; BENCHMARKS.md quotes a run.

import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { DatabaseSync } from 'node:sqlite'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { exitRemoving, openOpenClaw } from './api.mjs'
import { INPUT_LOG, WORKLOADS } from './workloads.mjs'

const ROUNDS = Number(process.env.BENCH_ROUNDS) || 15
const hr = () => process.hrtime.bigint()
const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1]
const batch = (ops, fn, before) => {
  if (before) {
    // Only the reads are timed, each on its own.
    let ns = 0n
    for (let i = 0; i < ops; i++) {
      before()
      const start = hr()
      fn()
      ns += hr() - start
    }
    return Number(ns) / ops / 1e3
  }
  const start = hr()
  for (let i = 0; i < ops; i++) fn()
  return Number(hr() - start) / ops / 1e3
}

/**
 * Prune 60,000 → 50,000 events, one-shot rounds on fresh copies: OpenClaw's prune transaction
 * (the bench/openclaw/ workload), the addon's `prune()`, and bare SQL: in one transaction, the
 * pruned watermark of each session that loses events and the delete of the 10,000 oldest.
 */
function prune(oc, dir, SessionState) {
  const ocPrune = WORKLOADS.find((w) => w.name === 'prune 60,000 -> 50,000 rows (total)')
  const ctx = { dir, oc }
  ocPrune.setup(ctx)
  const template = join(dir, 'addon-60k.sqlite')
  let store = new SessionState(template, { maxEvents: 1e9, onError: (e) => { throw e } })
  for (let i = 0; i < 60_000; i++) store.record({ ...INPUT_LOG, sessionKey: `agent:main:subagent:p${i % 600}` })
  store.close()
  const copy = (to) => {
    for (const suffix of ['-wal', '-shm', '']) rmSync(to + suffix, { force: true })
    copyFileSync(template, to)
    if (existsSync(`${template}-wal`)) copyFileSync(`${template}-wal`, `${to}-wal`)
    return to
  }
  const t = { openclaw: [], addon: [], bare: [] }
  const sides = {
    openclaw: () => ocPrune.round(ctx) / 1e3,
    addon: () => {
      store = new SessionState(copy(join(dir, 'addon-prune.sqlite')), { onError: (e) => { throw e } })
      const start = hr()
      const deleted = store.prune().eventsDeleted
      const us = Number(hr() - start) / 1e3
      store.close()
      if (deleted !== 10_000) throw new Error(`addon pruned ${deleted}`)
      return us
    },
    bare: () => {
      const db = new DatabaseSync(copy(join(dir, 'bare-prune.sqlite')))
      const start = hr()
      db.exec(`BEGIN IMMEDIATE;
        UPDATE session_state_heads SET pruned_max_sequence = (SELECT max(sequence) FROM session_state_events e
          WHERE e.session_key = session_state_heads.session_key AND e.agent_id = session_state_heads.agent_id AND e.sequence <= 10000)
          WHERE session_key IN (SELECT DISTINCT session_key FROM session_state_events WHERE sequence <= 10000);
        DELETE FROM session_state_events WHERE sequence <= 10000;
        COMMIT;`)
      const us = Number(hr() - start) / 1e3
      const left = db.prepare('SELECT count(*) AS n FROM session_state_events').get().n
      db.close()
      if (left !== 50_000) throw new Error(`bare SQL left ${left}`)
      return us
    },
  }
  const names = Object.keys(t)
  for (let r = 0; r < 7; r++) for (let k = 0; k < names.length; k++) t[names[(r + k) % names.length]].push(sides[names[(r + k) % names.length]]())
  const m = Object.fromEntries(names.map((n) => [n, median(t[n])]))
  console.log(
    `prune 60,000 → 50,000 events: OpenClaw ${(m.openclaw / 1e3).toFixed(1)} ms, addon ${(m.addon / 1e3).toFixed(1)} ms, bare SQL ${(m.bare / 1e3).toFixed(1)} ms; ` +
      `OpenClaw / addon ${(m.openclaw / m.addon).toFixed(2)}×, OpenClaw / bare SQL ${(m.openclaw / m.bare).toFixed(2)}×`,
  )
}

let code = 1
const dir = mkdtempSync(join(tmpdir(), 'session-awareness-floor-'))
try {
  mkdirSync(join(dir, 'state-dir'), { mode: 0o700 })
  const oc = await openOpenClaw(join(dir, 'state-dir'))
  const { SessionState } = createRequire(import.meta.url)('../..')
  const addonFile = join(dir, 'addon.sqlite')
  let store = new SessionState(addonFile, { wake: () => {}, onError: (e) => { throw e } })
  const o = { path: join(dir, 'openclaw.sqlite') }
  const CHANGES = 'agent:main:subagent:changes'
  const refs = Array.from({ length: 500 }, (_, i) => ({ sessionKey: `agent:main:subagent:v${i}` }))
  for (let i = 0; i < 200; i++) {
    store.record({ ...INPUT_LOG, sessionKey: CHANGES })
    oc.state.recordSessionStateEvent({ ...INPUT_LOG, sessionKey: CHANGES, agentId: 'main' }, o)
  }
  for (const { sessionKey } of refs) {
    store.record({ ...INPUT_LOG, sessionKey })
    oc.state.recordSessionStateEvent({ ...INPUT_LOG, sessionKey, agentId: 'main' }, o)
  }
  // The bare SQL reads a copy of the addon's file (the same tables and indexes as OpenClaw's;
  // the addon refuses a file another SQLite library of the process has open).
  // The copy is taken with the store closed: the store's guard takes the copy's own brief
  // handle on its file for another library's.
  store.close()
  const bareFile = join(dir, 'bare.sqlite')
  copyFileSync(addonFile, bareFile)
  if (existsSync(`${addonFile}-wal`)) copyFileSync(`${addonFile}-wal`, `${bareFile}-wal`)
  store = new SessionState(addonFile, { wake: () => {}, onError: (e) => { throw e } })
  const bare = new DatabaseSync(bareFile)
  const head = bare.prepare('SELECT last_sequence, pruned_max_sequence FROM session_state_heads WHERE session_key = ? AND agent_id = ?')
  const events = bare.prepare('SELECT * FROM session_state_events WHERE session_key = ? AND agent_id = ? AND sequence > ? ORDER BY sequence LIMIT ?')
  const earliest = bare.prepare('SELECT min(sequence) AS s FROM session_state_events WHERE session_key = ? AND agent_id = ?')
  const keys = refs.map((r) => r.sessionKey)
  // Reconcile: a turn reads what arrived since it last looked, right after the records.
  const RECONCILE = 'agent:main:subagent:reconcile'
  const seen = { openclaw: 0, addon: 0 }
  const last = (r) => (r.events ?? r.stateChanges?.events ?? r).at(-1)?.sequence
  const three = (side) => () => {
    for (let i = 0; i < 3; i++) {
      if (side === 'addon') store.record({ ...INPUT_LOG, sessionKey: RECONCILE })
      else oc.state.recordSessionStateEvent({ ...INPUT_LOG, sessionKey: RECONCILE, agentId: 'main' }, o)
    }
  }
  const inList = bare.prepare(`SELECT session_key, agent_id, last_sequence FROM session_state_heads WHERE session_key IN (${keys.map(() => '?').join(',')})`)
  const reads = {
    'changesSince, 200 events': {
      openclaw: () => oc.state.listSessionStateEventsSince(CHANGES, 'main', 0, 200, o),
      addon: () => store.changesSince(CHANGES, 0),
      bare: () => {
        bare.exec('BEGIN')
        head.get(CHANGES, 'main')
        const rows = events.all(CHANGES, 'main', 0, 201)
        earliest.get(CHANGES, 'main')
        bare.exec('COMMIT')
        return rows
      },
      check: (r) => (r.events ?? r.stateChanges?.events ?? r).length === 200,
    },
    'reconcile: changesSince of 3 fresh events, each read right after its 3 records (bare: the same SQL)': {
      before: { openclaw: three('openclaw'), addon: three('addon'), bare: () => {} },
      openclaw: () => {
        const r = oc.state.listSessionStateEventsSince(RECONCILE, 'main', seen.openclaw, 200, o)
        seen.openclaw = last(r) ?? seen.openclaw
        return r
      },
      addon: () => {
        const r = store.changesSince(RECONCILE, seen.addon)
        seen.addon = last(r) ?? seen.addon
        return r
      },
      bare: () => {
        bare.exec('BEGIN')
        head.get(CHANGES, 'main')
        const rows = events.all(CHANGES, 'main', 197, 201)
        earliest.get(CHANGES, 'main')
        bare.exec('COMMIT')
        return rows
      },
      check: (r) => (r.events ?? r.stateChanges?.events ?? r).length === 3,
    },
    'stateVersions, 500 keys (bare: one IN query, as OpenClaw)': {
      openclaw: () => oc.state.getSessionStateVersions(refs, o),
      addon: () => store.stateVersions(refs),
      bare: () => inList.all(...keys),
      check: (r) => (r.main ? Object.keys(r.main) : r).length === 500,
    },
    // A record of another session (not timed) comes before every read, on both sides. The
    // addon's record puts its new version in the read cache (semantics.md#reading-memory), so
    // the read after it finds all 500 there; before the read cache it read the 500 heads
    // from SQLite each time.
    'stateVersions, 500 keys, each read right after a record (bare: 500 point reads)': {
      before: {
        openclaw: () => oc.state.recordSessionStateEvent({ ...INPUT_LOG, sessionKey: CHANGES, agentId: 'main' }, o),
        addon: () => store.record({ ...INPUT_LOG, sessionKey: CHANGES }),
      },
      openclaw: () => oc.state.getSessionStateVersions(refs, o),
      addon: () => store.stateVersions(refs),
      bare: () => {
        bare.exec('BEGIN')
        const out = keys.map((k) => head.get(k, 'main'))
        bare.exec('COMMIT')
        return out
      },
      check: (r) => (r.main ? Object.keys(r.main) : r).length === 500,
    },
    'stateVersions, 500 keys (bare: 500 point reads, as the addon)': {
      openclaw: () => oc.state.getSessionStateVersions(refs, o),
      addon: () => store.stateVersions(refs),
      bare: () => {
        bare.exec('BEGIN')
        const out = keys.map((k) => head.get(k, 'main'))
        bare.exec('COMMIT')
        return out
      },
      check: (r) => (r.main ? Object.keys(r.main) : r).length === 500,
    },
  }
  for (const [name, read] of Object.entries(reads)) {
    for (const side of ['openclaw', 'addon', 'bare']) {
      read.before?.[side]?.()
      if (!read.check(read[side]())) throw new Error(`${name}: ${side} read the wrong rows`)
    }
    const t = { openclaw: [], addon: [], bare: [] }
    const sides = Object.keys(t)
    const perRound = { openclaw: [], addon: [] }
    for (let r = 0; r < ROUNDS + 1; r++) {
      for (let k = 0; k < sides.length; k++) {
        const side = sides[(r + k) % sides.length]
        const us = batch(20, read[side], read.before?.[side])
        if (r > 0) t[side].push(us)
        if (r > 0 && side !== 'bare') perRound[side].push(us)
      }
    }
    const m = Object.fromEntries(sides.map((s) => [s, median(t[s])]))
    console.log(
      `${name}: OpenClaw ${m.openclaw.toFixed(0)} µs, addon ${m.addon.toFixed(0)} µs, bare SQL ${m.bare.toFixed(0)} µs; ` +
        `OpenClaw / addon ${(m.openclaw / m.addon).toFixed(2)}×, OpenClaw / bare SQL ${(m.openclaw / m.bare).toFixed(2)}×`,
    )
    // Rounds alternate sides, so round r of OpenClaw and of the addon ran back to back.
    const ratios = perRound.addon.map((a, i) => perRound.openclaw[i] / a).sort((x, y) => x - y)
    console.log(`  per round OpenClaw / addon: lowest ${ratios[0].toFixed(2)}×, highest ${ratios.at(-1).toFixed(2)}×`)
  }
  const cache = store.stats().readCache ?? { bytes: 0, hits: 0, misses: 0 }
  console.log(
    `addon read cache after the reads: ${(cache.bytes / 1024).toFixed(1)} KiB held (budget ${4096} KiB), ` +
      `${cache.hits} hits, ${cache.misses} misses`,
  )
  bare.close()
  store.close()
  prune(oc, dir, createRequire(import.meta.url)('../..').SessionState)
  oc.db.closeOpenClawStateDatabase()
  code = 0
} catch (err) {
  console.error(err)
} finally {
  exitRemoving(dir, code)
}
