// `session-awareness import` and importOpenClawState: the file OpenClaw 2026.9.6 wrote and a
// generated 60,000-event file arrive exactly, progress lines on stderr, exit codes, the source
// left unchanged, and the child-process function resolving with the summary or rejecting with
// the command's code.
import { spawnSync } from 'node:child_process'
import * as fs from 'node:fs'
import * as os from 'node:os'
import * as path from 'node:path'

import { SessionState, inspectDatabase, readEvents } from '../lib'
import { ImportProgress, importOpenClawState, importStateDatabase } from '../lib/import'
import { rawDb } from './helpers'

const CLI = path.join(__dirname, '..', 'bin', 'session-awareness.js')
const FIXTURES = path.join(__dirname, '..', 'crates', 'core', 'tests', 'fixtures')
const REAL = path.join(FIXTURES, 'openclaw-2026.9.6.sqlite')
const MAIN = 'agent:main:main'
const CHILD = 'agent:main:subagent:fixture-child'
const LARGE = 60_000
const SESSIONS = 100
const T = Date.UTC(2030, 0, 1)

let dir: string

function cli(...args: string[]) {
  const out = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', timeout: 120_000 })
  return { status: out.status, stdout: out.stdout, stderr: out.stderr }
}

function snapshot(file: string) {
  return {
    bytes: fs.readFileSync(file).toString('base64'),
    mtimeMs: fs.statSync(file).mtimeMs,
    files: fs.readdirSync(path.dirname(file)).sort(),
  }
}

/** The code of the error `f` throws. */
function codeOf(f: () => unknown): unknown {
  try {
    f()
  } catch (err) {
    return (err as { code?: unknown }).code
  }
  throw new Error('did not throw')
}

function table(read: number, inserted: number, updated: number, present: number, skipped: number) {
  return { read, inserted, updated, present, skipped }
}

/** A copy of the file OpenClaw wrote, alone in its own folder. */
function realSource(): string {
  const folder = fs.mkdtempSync(path.join(dir, 'openclaw-'))
  const file = path.join(folder, 'openclaw.sqlite')
  fs.copyFileSync(REAL, file)
  return file
}

/**
 * An OpenClaw 2026.9.6 state file (OpenClaw's own statements) holding LARGE events over
 * SESSIONS sessions and their heads, written in one transaction.
 */
let large: string
function largeSource(): string {
  if (large) return large
  fs.mkdirSync(path.join(dir, 'large'))
  large = path.join(dir, 'large', 'openclaw.sqlite')
  const db = rawDb(large)
  db.exec(fs.readFileSync(path.join(FIXTURES, 'openclaw-schema', '5-openclaw-2026.9.6.sql'), 'utf8'))
  db.exec(`
    BEGIN;
    INSERT INTO session_state_events (session_key, agent_id, kind, actor_type, occurred_at, summary)
      WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < ${LARGE - 1})
      SELECT 'agent:main:subagent:s' || (i % ${SESSIONS}), 'main', 'goal_changed', 'human',
        ${T} + i, 'goal ' || i FROM n;
    INSERT INTO session_state_heads (session_key, agent_id, last_sequence, updated_at)
      SELECT session_key, agent_id, max(sequence), max(occurred_at) FROM session_state_events
      GROUP BY session_key, agent_id;
    COMMIT;`)
  db.close()
  return large
}

const REAL_SUMMARY = {
  events: table(13, 13, 0, 0, 0),
  heads: table(6, 6, 0, 0, 0),
  cursors: table(6, 6, 0, 0, 0),
  upstreamLinks: table(2, 2, 0, 0, 0),
  sourceLastSequence: 13,
  sourceWal: false,
}

beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sa-import-'))
})
afterAll(() => {
  fs.rmSync(dir, { recursive: true, force: true })
})

describe('session-awareness import', () => {
  test('copies the file OpenClaw wrote exactly, leaves it unchanged, and adds nothing twice', () => {
    const source = realSource()
    const before = snapshot(source)
    const dest = path.join(dir, 'real', 'session-state.sqlite')
    const out = cli('import', source, dest, '--json')
    expect(out.status).toBe(0)
    expect(out.stderr).toBe('')
    expect(JSON.parse(out.stdout)).toEqual(REAL_SUMMARY)
    expect(snapshot(source)).toEqual(before)

    const got = inspectDatabase(dest)
    const want = inspectDatabase(source)
    expect(got.lastSequence).toBe(13)
    expect(got.sessions).toEqual(want.sessions)
    expect(got.cursors).toEqual(want.cursors)
    expect(got.pendingNotices).toEqual(want.pendingNotices)
    expect(readEvents(dest, CHILD).events).toEqual(readEvents(source, CHILD).events)

    const again = cli('import', source, dest)
    expect(again.status).toBe(0)
    const lines = again.stdout.trimEnd().split('\n')
    expect(lines[0]).toBe(`imported   ${source} -> ${dest}`)
    expect(lines[1]).toBe('source     no -wal file (read as a snapshot), last sequence 13')
    expect(lines.slice(3).map((l) => l.trim().split(/ +/))).toEqual([
      ['TABLE', 'READ', 'INSERTED', 'UPDATED', 'PRESENT', 'SKIPPED'],
      ['session_state_events', '13', '0', '0', '13', '0'],
      ['session_state_heads', '6', '0', '0', '6', '0'],
      ['session_watch_cursors', '6', '0', '0', '6', '0'],
      ['session_upstream_links', '2', '0', '0', '2', '0'],
    ])

    // The store works on the result: the imported pending notice, and the next sequence.
    const store = new SessionState(dest, { clock: () => 1796050458368 + 60_000 })
    store.sweep()
    const notice = store.drain(MAIN).find((n) => n.targetKey === CHILD)
    expect(notice?.text).toBe(
      `Session "${CHILD}" changed (other actor). Reconcile before acting: session_status sessionKey "${CHILD}" changesSince 3.`,
    )
    const next = store.record({ sessionKey: CHILD, kind: 'compacted', actorType: 'system', summary: 'x' })
    expect(next?.sequence).toBe(14)
    store.close()
  })

  test('prints progress every 10,000 rows of a large file', () => {
    const source = largeSource()
    const dest = path.join(dir, 'large-out', 'session-state.sqlite')
    const out = cli('import', source, dest)
    expect(out.status).toBe(0)
    expect(out.stderr.trimEnd().split('\n')).toEqual(
      [10, 20, 30, 40, 50, 60].map((k) => `import     session_state_events ${k * 1000}/${LARGE}`),
    )
    const report = inspectDatabase(dest)
    expect(report.counts.events).toBe(LARGE)
    expect(report.lastSequence).toBe(LARGE)
    expect(report.sessions.map((s) => s.stateVersion).sort((a, b) => a - b)).toEqual(
      Array.from({ length: SESSIONS }, (_, i) => LARGE - SESSIONS + 1 + i),
    )
    const s7 = readEvents(dest, 'agent:main:subagent:s7', { since: LARGE - 250 })
    expect(s7.events.map((e) => e.sequence)).toEqual([59808, 59908])
    expect(s7.events.map((e) => e.summary)).toEqual(['goal 59807', 'goal 59907'])
  })

  test('exit codes: 2 for bad usage, 1 for an unreadable source or a diverged destination', () => {
    const usage = cli('import', realSource(), '--json')
    expect(usage.status).toBe(2)
    expect(JSON.parse(usage.stderr).error.code).toBe('ERR_USAGE')
    expect(cli('import', 'a', 'b', '--since', '3').status).toBe(2)

    const missing = cli('import', path.join(dir, 'none.sqlite'), path.join(dir, 'x.sqlite'), '--json')
    expect(missing.status).toBe(1)
    expect(JSON.parse(missing.stderr).error.code).toBe('ERR_DB')
    expect(fs.existsSync(path.join(dir, 'x.sqlite'))).toBe(false)

    const dest = path.join(dir, 'diverged', 'session-state.sqlite')
    const store = new SessionState(dest, { clock: () => T })
    store.record({ sessionKey: 'agent:ops:main', kind: 'created', actorType: 'system', summary: 'own' })
    store.close()
    const before = fs.readFileSync(dest)
    const diverged = cli('import', realSource(), dest, '--json')
    expect(diverged.status).toBe(1)
    expect(JSON.parse(diverged.stderr).error.code).toBe('ERR_IMPORT_DIVERGED')
    expect(fs.readFileSync(dest).equals(before)).toBe(true)
    const text = cli('import', realSource(), dest)
    expect(text.status).toBe(1)
    expect(text.stderr).toMatch(/\(ERR_IMPORT_DIVERGED\)\n$/)
  })
})

describe('importStateDatabase', () => {
  test('a throwing onProgress is called once and reported as ERR_PROGRESS_CALLBACK after the import', () => {
    const boom = new Error('progress failed')
    let calls = 0
    const dest = path.join(dir, 'native', 'session-state.sqlite')
    const run = () =>
      importStateDatabase(realSource(), dest, {
        batchRows: 5,
        onProgress: () => {
          calls++
          throw boom
        },
      })
    expect(codeOf(run)).toBe('ERR_PROGRESS_CALLBACK')
    expect(calls).toBe(1)
    expect(inspectDatabase(dest).counts).toEqual({ events: 13, heads: 6, cursors: 6, upstreamLinks: 2 })
  })

  test('bad arguments are ERR_INVALID_ARG and create nothing', () => {
    const dest = path.join(dir, 'native-bad.sqlite')
    for (const call of [
      () => importStateDatabase(realSource(), dest, { batchRows: 0 }),
      () => importStateDatabase(realSource(), dest, { batchRows: 1.5 }),
      () => importStateDatabase(realSource(), dest, { busyTimeoutMs: -1 }),
      () => importStateDatabase(realSource(), dest, { onProgress: 3 as never }),
      () => importStateDatabase(3 as never, dest),
      () => importStateDatabase(REAL, REAL),
    ]) {
      expect(codeOf(call)).toBe('ERR_INVALID_ARG')
    }
    expect(fs.existsSync(dest)).toBe(false)
  })
})

describe('importOpenClawState', () => {
  test('resolves with the summary and forwards progress', async () => {
    expect(await importOpenClawState(realSource(), path.join(dir, 'fn', 'a.sqlite'))).toEqual(REAL_SUMMARY)

    const seen: ImportProgress[] = []
    const summary = await importOpenClawState(largeSource(), path.join(dir, 'fn', 'b.sqlite'), {
      onProgress: (p) => seen.push(p),
    })
    expect(summary.events).toEqual(table(LARGE, LARGE, 0, 0, 0))
    expect(summary.heads).toEqual(table(SESSIONS, SESSIONS, 0, 0, 0))
    expect(summary.upstreamLinks).toEqual(table(0, 0, 0, 0, 0))
    expect(seen).toEqual(
      [10, 20, 30, 40, 50, 60].map((k) => ({ table: 'session_state_events', done: k * 1000, total: LARGE })),
    )
  })

  test('rejects with the code of the command', async () => {
    const dest = path.join(dir, 'fn-diverged', 'session-state.sqlite')
    const store = new SessionState(dest, { clock: () => T })
    store.record({ sessionKey: 'agent:ops:main', kind: 'created', actorType: 'system', summary: 'own' })
    store.close()
    await expect(importOpenClawState(realSource(), dest)).rejects.toMatchObject({
      code: 'ERR_IMPORT_DIVERGED',
      exitCode: 1,
    })
    await expect(importOpenClawState(path.join(dir, 'none.sqlite'), dest)).rejects.toMatchObject({
      code: 'ERR_DB',
      exitCode: 1,
    })
    const controller = new AbortController()
    const pending = importOpenClawState(largeSource(), path.join(dir, 'fn-abort.sqlite'), {
      signal: controller.signal,
    })
    controller.abort()
    await expect(pending).rejects.toMatchObject({ code: 'ABORT_ERR' })
  })
})
