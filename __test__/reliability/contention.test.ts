// Contention: four writer processes record 5,000 events each into one database file while a
// fifth follows them with `changesSince` and sweeps and drains throughout. Nothing is lost,
// sequences are unique, each session keeps its order, and no busy database reaches a caller.
// The second test does the same with writers on the Promise API (`recordAsync`, many calls in
// flight, committed in groups by each store's writer thread) beside one synchronous writer.
import * as fs from 'node:fs'
import * as path from 'node:path'

import { SessionState } from '../../lib'
import { reportFigures, startChild, tempDir, withRaw, type LineChild } from './support'

const PER_WRITER = 5000

type Mode = 'sync' | 'async'

interface WriterReport {
  writer: number
  sequences: Array<number | null>
  nulls: number
  errors: string[]
  ms: number
}

interface ReaderReport {
  seen: number
  reads: number
  sweeps: number
  drained: number
  rounds: number
  errors: string[]
  violations: unknown[]
}

let dir = ''
beforeAll(() => {
  dir = tempDir('contention')
})
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }))

function lastJson<T>(child: LineChild): T {
  return JSON.parse(child.lines[child.lines.length - 1]) as T
}

test(`4 processes x ${PER_WRITER} records and a reader on one file lose nothing`, async () => {
  await contend('contention', ['sync', 'sync', 'sync', 'sync'])
}, 600_000)

test(`3 processes x ${PER_WRITER} records through recordAsync, one synchronous writer and a reader on one file lose nothing`, async () => {
  await contend('contention-async', ['async', 'async', 'async', 'sync'])
}, 600_000)

/** Runs one writer process per entry of `modes` and the reader on a new file, then checks it. */
async function contend(name: string, modes: Mode[]): Promise<void> {
  const WRITERS = modes.length
  const file = path.join(dir, `${name}.sqlite`)
  // All of them open the new file at once: creating the schema is contended too.
  const writers = modes.map((mode, w) => startChild('contention-writer.js', [file, String(w), String(PER_WRITER), mode]))
  const reader = startChild('contention-reader.js', [file, String(WRITERS), String(PER_WRITER)])
  await Promise.all([...writers, reader].map((c) => c.waitLine((l) => l === 'ready', 120_000)))
  const started = Date.now()
  for (const w of writers) w.send('go')
  const exits = await Promise.all(writers.map((w) => w.exited))
  const writersDone = Date.now()
  const readerExit = await reader.exited
  const readerDone = Date.now()
  for (const e of [...exits, readerExit]) expect(e).toEqual({ code: 0, signal: null })
  for (const c of [...writers, reader]) expect(c.stderr()).toBe('')

  const reports = writers.map((w) => lastJson<WriterReport>(w))
  const read = lastJson<ReaderReport>(reader)

  // No record returned null, nothing went to onError, no call threw (SQLITE_BUSY included).
  for (const r of reports) {
    expect(r.nulls).toBe(0)
    expect(r.errors).toEqual([])
    expect(r.sequences).toHaveLength(PER_WRITER)
  }
  expect(read.errors).toEqual([])
  expect(read.violations).toEqual([])
  expect(read.seen).toBe(WRITERS * PER_WRITER)

  // Sequences are unique across processes and increase within each writer, in call order
  // (the Promise API commits one caller's calls in the order they were made).
  const all = reports.flatMap((r) => r.sequences as number[])
  expect(new Set(all).size).toBe(WRITERS * PER_WRITER)
  for (const r of reports) {
    const seqs = r.sequences as number[]
    expect(seqs.every((s, i) => i === 0 || s > seqs[i - 1])).toBe(true)
  }

  // The file holds exactly those events, each as its writer returned it, in per-session order.
  withRaw(file, (db) => {
    expect(db.pragma('integrity_check', { simple: true })).toBe('ok')
    expect(db.prepare('SELECT count(*) AS c FROM session_state_events').get()).toEqual({ c: WRITERS * PER_WRITER })
    const bySeq = new Map<number, { writer: number; n: number; key: string }>()
    for (const row of db.prepare('SELECT sequence, session_key, payload_json FROM session_state_events').all()) {
      const p = JSON.parse(row.payload_json as string) as { writer: number; n: number }
      bySeq.set(row.sequence as number, { ...p, key: row.session_key as string })
    }
    for (const r of reports) {
      r.sequences.forEach((s, n) => {
        expect(bySeq.get(s as number)).toEqual({ writer: r.writer, n, key: `agent:main:subagent:w${r.writer}-${'ab'[n % 2]}` })
      })
    }
    for (let w = 0; w < WRITERS; w += 1) {
      for (const [half, first] of [['a', 0], ['b', 1]] as const) {
        const key = `agent:main:subagent:w${w}-${half}`
        const ns = db
          .prepare('SELECT payload_json FROM session_state_events WHERE session_key = ? ORDER BY sequence')
          .all(key)
          .map((row) => (JSON.parse(row.payload_json as string) as { n: number }).n)
        expect(ns).toEqual(Array.from({ length: PER_WRITER / 2 }, (_, i) => first + 2 * i))
        const head = db.prepare('SELECT last_sequence AS s FROM session_state_heads WHERE session_key = ?').get(key)
        expect(head).toEqual({ s: Math.max(...(reports[w].sequences as number[]).filter((_, n) => n % 2 === first)) })
      }
    }
    // The coordinator's cursors stayed consistent under every writer.
    for (const c of db.prepare('SELECT * FROM session_watch_cursors').all()) {
      expect(c.last_seen_sequence as number).toBeLessThanOrEqual(c.notified_sequence as number)
      expect(c.notified_sequence as number).toBeLessThanOrEqual(c.material_sequence as number)
    }
  })

  // And the store reads it back through the API.
  const state = new SessionState(file)
  try {
    const versions = state.stateVersions(
      Array.from({ length: WRITERS * 2 }, (_, i) => ({ sessionKey: `agent:main:subagent:w${i >> 1}-${'ab'[i % 2]}` })),
    )
    expect(versions).toHaveLength(WRITERS * 2)
  } finally {
    state.close()
  }

  const seconds = (writersDone - started) / 1000
  reportFigures(name, {
    writers: WRITERS,
    modes,
    recordsPerWriter: PER_WRITER,
    events: WRITERS * PER_WRITER,
    writeSeconds: seconds,
    recordsPerSecond: Math.round((WRITERS * PER_WRITER) / seconds),
    writerSeconds: reports.map((r) => Math.round(r.ms) / 1000),
    readerSeconds: (readerDone - started) / 1000,
    readerChangesSinceCalls: read.reads,
    readerSweeps: read.sweeps,
    readerNoticesDrained: read.drained,
    nullRecords: reports.reduce((acc, r) => acc + r.nulls, 0),
    callerErrors: reports.reduce((acc, r) => acc + r.errors.length, read.errors.length),
  })
}
