// Crash: a child records without pause (material events with watchers, drains, acknowledges,
// watches, spawns) and is killed with SIGKILL at random moments. After each kill the file is
// reopened and checked: every record that had returned is there, no sequence was reused,
// heads match their sessions, cursors are consistent, and `sweep` restores every notice.
// The second test records through `recordAsync` instead, with many records in flight while
// the other calls run synchronously: every record whose promise had resolved is there.
import * as fs from 'node:fs'
import * as path from 'node:path'

import { SessionState } from '../../lib'
import { delay, prng, rawDb, reportFigures, seedFromEnv, startChild, tempDir, withRaw, type CodedError } from './support'

// eslint-disable-next-line @typescript-eslint/no-require-imports
const { TARGETS, WATCHERS } = require('../fixtures/crash-keys.js') as { TARGETS: string[]; WATCHERS: string[] }

const KILLS = 20

interface Returned {
  sequence: number
  target: string
  round: number
  n: number
}

interface CursorRow {
  watcher: string
  target: string
  l: number
  n: number
  m: number
}

let dir = ''
beforeAll(() => {
  dir = tempDir('crash')
})
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }))

test(`${KILLS} SIGKILLs while recording lose nothing that had returned`, async () => {
  await crashRounds('sync', 'crash')
}, 300_000)

test(`${KILLS} SIGKILLs while recording through recordAsync lose nothing whose promise had resolved`, async () => {
  await crashRounds('async', 'crash-async')
}, 300_000)

/** Kills a child recording in `mode` KILLS times and checks the file after each kill. */
async function crashRounds(mode: 'sync' | 'async', name: string): Promise<void> {
  const seed = seedFromEnv()
  process.stdout.write(`${name} test seed ${seed} (replay with SA_SEED=${seed})\n`)
  const rand = prng(seed)
  const file = path.join(dir, `${name}.sqlite`)
  const returned = new Map<number, Returned>()
  let maxSequenceBefore = 0
  let eventsInFile = 0
  let eventsChecked = 0
  let killedBeforeReady = 0
  let pendingRestored = 0
  const started = Date.now()

  for (let round = 0; round < KILLS; round += 1) {
    const child = startChild('crash-writer.js', [file, String((seed + round) >>> 0), String(round), mode])
    // Most kills land while records stream; one in five lands anywhere from spawn on,
    // which includes opening the file and recovering the previous crash's WAL.
    const early = rand() < 0.2
    if (!early) await child.waitLine((l) => l === 'ready')
    await delay(Math.floor(rand() * (early ? 400 : 300)))
    child.proc.kill('SIGKILL')
    const { signal } = await child.exited
    expect(signal).toBe('SIGKILL')
    expect(child.stderr()).toBe('')
    if (!child.lines.includes('ready')) killedBeforeReady += 1

    // Only complete lines count: each names a record that had returned before the kill.
    const thisRound: Returned[] = []
    for (const line of child.lines) {
      if (line === 'ready') continue
      const [tag, seq, t, r, n] = line.split(' ')
      // Neither a null record, an onError call nor a rejection is acceptable while nothing is
      // wrong.
      expect(tag).toBe('R')
      const rec = { sequence: Number(seq), target: TARGETS[Number(t)], round: Number(r), n: Number(n) }
      expect(returned.has(rec.sequence)).toBe(false)
      returned.set(rec.sequence, rec)
      thisRound.push(rec)
    }
    // A sequence is never handed out twice, even across crashes: this round's are all new.
    if (thisRound.length > 0) {
      expect(Math.min(...thisRound.map((r) => r.sequence))).toBeGreaterThan(maxSequenceBefore)
    }
    // One caller's records commit in call order, resolved or returned: by the counter n, the
    // sequences increase.
    const byCall = [...thisRound].sort((a, b) => a.n - b.n)
    expect(byCall.every((r, i) => i === 0 || r.sequence > byCall[i - 1].sequence)).toBe(true)

    // Killed before the child created the file or committed its schema: nothing can have
    // returned yet, and there is nothing to check.
    const created =
      fs.existsSync(file) &&
      withRaw(
        file,
        (db) => db.prepare("SELECT count(*) AS c FROM sqlite_master WHERE name = 'session_state_events'").get()?.c === 1,
        { readonly: true },
      )
    if (!created) {
      expect(returned.size).toBe(0)
      continue
    }

    // Read the file as the crash left it, before a store of this process opens it: the
    // raw handle is a second copy of SQLite, and two copies must not share a file at once.
    const db = rawDb(file, { readonly: true })
    let rows: Map<number, { session_key: string; payload_json: string | null }>
    let heads: Array<Record<string, unknown>>
    let headless: unknown
    let cursors: CursorRow[]
    const tops = new Map<string, number>()
    try {
      expect(db.pragma('integrity_check', { simple: true })).toBe('ok')
      rows = new Map()
      for (const r of db.prepare('SELECT sequence, session_key, payload_json FROM session_state_events').all()) {
        rows.set(r.sequence as number, { session_key: r.session_key as string, payload_json: r.payload_json as string | null })
      }
      heads = db
        .prepare(
          'SELECT h.session_key AS k, h.agent_id AS a, h.last_sequence AS head, ' +
            '(SELECT max(sequence) FROM session_state_events e ' +
            ' WHERE e.session_key = h.session_key AND e.agent_id = h.agent_id) AS top ' +
            'FROM session_state_heads h',
        )
        .all()
      headless = db
        .prepare(
          'SELECT count(*) AS c FROM (SELECT DISTINCT session_key, agent_id FROM session_state_events) e ' +
            'WHERE NOT EXISTS (SELECT 1 FROM session_state_heads h ' +
            'WHERE h.session_key = e.session_key AND h.agent_id = e.agent_id)',
        )
        .get()
      for (const t of TARGETS) {
        const top = db.prepare('SELECT max(sequence) AS s FROM session_state_events WHERE session_key = ?').get(t)
        tops.set(t, (top?.s as number | null) ?? 0)
      }
      cursors = db
        .prepare(
          'SELECT watcher_session_key AS watcher, target_session_key AS target, last_seen_sequence AS l, ' +
            'notified_sequence AS n, material_sequence AS m FROM session_watch_cursors',
        )
        .all() as unknown as CursorRow[]
    } finally {
      db.close()
    }

    // Every record that had returned, in any round so far, is present as it was returned.
    for (const r of returned.values()) {
      expect(rows.get(r.sequence)).toEqual({ session_key: r.target, payload_json: JSON.stringify({ round: r.round, n: r.n }) })
    }
    eventsChecked += returned.size
    eventsInFile = rows.size
    maxSequenceBefore = Math.max(0, ...rows.keys())

    // Each head equals its session's largest sequence, and every session has one.
    for (const h of heads) expect(h.head).toBe(h.top)
    expect(headless).toEqual({ c: 0 })

    // Cursors: L <= N <= M.
    for (const c of cursors) {
      expect(c.l).toBeLessThanOrEqual(c.n)
      expect(c.n).toBeLessThanOrEqual(c.m)
    }

    // Reopened, the store agrees, M is within the target's head, and sweep restores every
    // notice with material history past L, naming L, once.
    const errors: CodedError[] = []
    const state = new SessionState(file, { onError: (e) => errors.push(e) })
    try {
      for (const t of TARGETS) expect(state.stateVersion(t)).toBe(tops.get(t))
      for (const c of cursors) expect(c.m).toBeLessThanOrEqual(state.stateVersion(c.target))
      const behind = cursors.filter((c) => c.m > c.l)
      const report = state.sweep()
      expect(report.notices).toBe(behind.length)
      expect(report.prune).toEqual({ eventsDeleted: 0, cursorsDeleted: 0 })
      for (const w of WATCHERS) {
        const expected = behind
          .filter((c) => c.watcher === w)
          .map((c) => [c.target, c.l])
          .sort()
        const queued = state
          .peek(w)
          .map((n) => [n.targetKey, n.changesSince])
          .sort()
        expect(queued).toEqual(expected)
      }
      pendingRestored += behind.length
    } finally {
      state.close()
    }
    expect(errors).toEqual([])
  }

  const rounds = [...returned.values()].reduce((acc, r) => acc.add(r.round), new Set<number>()).size
  reportFigures(name, {
    seed,
    mode,
    kills: KILLS,
    killedBeforeReady,
    roundsWithRecords: rounds,
    recordsReturned: returned.size,
    eventsInFile,
    eventPresenceChecks: eventsChecked,
    pendingNoticesRestoredBySweep: pendingRestored,
    seconds: (Date.now() - started) / 1000,
  })
  expect(returned.size).toBeGreaterThan(0)
}
