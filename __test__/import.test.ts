// `session-awareness import` and importOpenClawState: the file OpenClaw 2026.9.6 wrote and a
// generated 60,000-event file arrive exactly, progress lines on stderr, exit codes, the source
// left unchanged, and the child-process function resolving with the summary or rejecting with
// the command's code.
import { spawnSync } from 'node:child_process'
import * as fs from 'node:fs'
import * as os from 'node:os'
import * as path from 'node:path'

import { SessionState, inspectDatabase, readEvents } from '../index'
import { ImportProgress, importOpenClawState } from '../lib/import'

const CLI = path.join(__dirname, '..', 'bin', 'session-awareness.js')
const REAL = path.join(__dirname, '..', 'crates', 'core', 'tests', 'fixtures', 'openclaw-2026.9.6.sqlite')
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

/** A state file of LARGE events over SESSIONS sessions, written by the store itself. */
let large: string
function largeSource(): string {
  if (large) return large
  large = path.join(dir, 'large', 'state.sqlite')
  const store = new SessionState(large, { clock: () => T, maxEvents: 1_000_000 })
  for (let i = 0; i < LARGE; i++) {
    store.record({
      sessionKey: `agent:main:subagent:s${i % SESSIONS}`,
      kind: 'goal_changed',
      actorType: 'human',
      summary: `goal ${i}`,
    })
  }
  store.close()
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

describe('importOpenClawState', () => {
  test('resolves with the summary and forwards progress', async () => {
    expect(await importOpenClawState(realSource(), path.join(dir, 'fn', 'a.sqlite'))).toEqual(REAL_SUMMARY)

    const seen: ImportProgress[] = []
    const summary = await importOpenClawState(largeSource(), path.join(dir, 'fn', 'b.sqlite'), {
      onProgress: (p) => seen.push(p),
    })
    expect(summary.events).toEqual(table(LARGE, LARGE, 0, 0, 0))
    expect(summary.heads).toEqual(table(SESSIONS, SESSIONS, 0, 0, 0))
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
