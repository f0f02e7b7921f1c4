// The command-line tool: `session-awareness inspect` and `events`, run as a gateway engineer
// would, on a database this test builds; exact JSON, readable text, exit codes, and proof
// that the file is never changed.
import { execFileSync } from 'node:child_process'
import * as fs from 'node:fs'
import * as os from 'node:os'
import * as path from 'node:path'

import { SessionState, encodeNoticeContextKey, inspectDatabase, readEvents } from '../lib'
import { CHILD, OPS, PARENT, T, cli, writeCliStore } from './cli-store'

let dir: string
let db: string

/** The main file's bytes and mtime, and which files sit beside it. */
function snapshot(file: string) {
  return {
    bytes: fs.readFileSync(file).toString('base64'),
    mtimeMs: fs.statSync(file).mtimeMs,
    files: fs.readdirSync(path.dirname(file)).sort(),
  }
}

/** Table rows of a text report, split into cells (columns are two or more spaces apart). */
function rows(text: string): string[][] {
  return text.split('\n').map((line) => line.trim().split(/ {2,}/))
}

function notice(watcher: string, target: string, since: number) {
  return {
    watcherKey: watcher,
    targetKey: target,
    changesSince: since,
    text:
      `Session ${JSON.stringify(target)} changed (other actor). Reconcile before acting: ` +
      `session_status sessionKey ${JSON.stringify(target)} changesSince ${since}.`,
    contextKey: encodeNoticeContextKey(target),
  }
}

beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sa-cli-'))
  db = path.join(dir, 'state.sqlite')
  writeCliStore(db, { channel: 'telegram' })
})

afterAll(() => fs.rmSync(dir, { recursive: true, force: true }))

test('inspect --json reports sessions, cursors with L/N/M and lag, pending notices and counts', () => {
  const before = snapshot(db)
  expect(before.files).toEqual(['state.sqlite'])
  const out = cli('inspect', db, '--json')
  expect(out.stderr).toBe('')
  expect(out.status).toBe(0)
  expect(JSON.parse(out.stdout)).toStrictEqual({
    path: db,
    fileBytes: fs.statSync(db).size,
    wal: false,
    missingTables: [],
    counts: { events: 4, heads: 3, cursors: 2, upstreamLinks: 0 },
    lastSequence: 4,
    oldestEvent: {
      sequence: 1, sessionKey: CHILD, agentId: 'main', kind: 'child_spawned', actorType: 'agent',
      actorId: PARENT, runId: 'run-1', occurredAt: T, summary: 'child spawned',
    },
    sessions: [
      { sessionKey: CHILD, agentId: 'main', stateVersion: 2, prunedMaxSequence: 0, updatedAt: T,
        retainedEvents: 2, earliestRetainedSequence: 1 },
      { sessionKey: OPS, agentId: 'ops', stateVersion: 3, prunedMaxSequence: 0, updatedAt: T,
        retainedEvents: 1, earliestRetainedSequence: 3 },
      { sessionKey: 'global', agentId: 'main', stateVersion: 4, prunedMaxSequence: 0, updatedAt: T,
        retainedEvents: 1, earliestRetainedSequence: 4 },
    ],
    cursors: [
      { watcherKey: PARENT, targetKey: CHILD, lastSeen: 1, notified: 2, material: 2,
        provenance: 'explicit', updatedAt: T, targetVersion: 2, lag: 1, pending: true },
      { watcherKey: PARENT, targetKey: OPS, lastSeen: 0, notified: 3, material: 3,
        provenance: 'ambient-group', updatedAt: T, targetVersion: 3, lag: 1, pending: true },
    ],
    pendingNotices: [notice(PARENT, CHILD, 1), notice(PARENT, OPS, 0)],
  })
  expect(snapshot(db)).toEqual(before)
})

test('inspect prints a readable report', () => {
  const out = cli('inspect', db)
  expect(out.status).toBe(0)
  const lines = out.stdout.split('\n')
  expect(lines[0]).toBe(`database   ${db}`)
  expect(lines).toContain('rows       4 events, 3 session heads, 2 cursors, 0 upstream links')
  expect(lines).toContain('sequence   last given 4')
  expect(lines.find((l) => l.startsWith('oldest'))).toMatch(
    /^oldest {5}#1 of agent:main:subagent:c, child_spawned, 2030-01-01T00:00:00\.000Z \(.+ ago\)$/,
  )
  const cells = rows(out.stdout)
  expect(cells).toContainEqual(
    ['SESSION', 'AGENT', 'VERSION', 'PRUNED', 'EVENTS', 'EARLIEST', 'UPDATED'],
  )
  expect(cells).toContainEqual([OPS, 'ops', '3', '0', '1', '3', '2030-01-01T00:00:00.000Z'])
  expect(cells).toContainEqual(
    ['WATCHER', 'TARGET', 'L', 'N', 'M', 'VERSION', 'LAG', 'PROVENANCE', 'PENDING', 'UPDATED'],
  )
  expect(cells).toContainEqual(
    [PARENT, CHILD, '1', '2', '2', '2', '1', 'explicit', 'yes', '2030-01-01T00:00:00.000Z'],
  )
  expect(lines).toContain('Pending notices (2)')
  expect(lines).toContain(`  ${PARENT} <- ${CHILD}  changesSince 1`)
  expect(lines).toContain(`    ${notice(PARENT, CHILD, 1).text}`)
})

test('events lists a session after --since, for --agent, as JSON and as text', () => {
  const json = cli('events', db, CHILD, '--since', '1', '--json')
  expect(json.status).toBe(0)
  expect(JSON.parse(json.stdout)).toStrictEqual({
    sessionKey: CHILD, agentId: 'main', stateVersion: 2, prunedMaxSequence: 0, historyGap: false,
    events: [{
      sequence: 2, sessionKey: CHILD, agentId: 'main', kind: 'human_direct_message',
      actorType: 'human', occurredAt: T, summary: 'human message via telegram',
      payload: { channel: 'telegram' },
    }],
  })
  const all = JSON.parse(cli('events', db, CHILD, '--json').stdout)
  expect(all.events.map((e: { sequence: number }) => e.sequence)).toEqual([1, 2])
  // After `--` every argument is positional (a key may start with a dash).
  expect(JSON.parse(cli('events', '--json', '--', db, CHILD).stdout)).toStrictEqual(all)
  const otherAgent = JSON.parse(cli('events', db, 'global', '--agent=ops', '--json').stdout)
  expect(otherAgent).toStrictEqual({
    sessionKey: 'global', agentId: 'ops', stateVersion: 0, prunedMaxSequence: 0,
    historyGap: false, events: [],
  })

  const text = cli('events', db, CHILD)
  expect(text.status).toBe(0)
  expect(text.stdout.split('\n')).toEqual([
    `session    ${CHILD} (agent main)`,
    'version    2, pruned watermark 0',
    'events     2 events after 0',
    `  #1  2030-01-01T00:00:00.000Z  child_spawned  agent ${PARENT}  "child spawned"  run run-1`,
    '  #2  2030-01-01T00:00:00.000Z  human_direct_message  human  "human message via telegram"  ' +
      '{"channel":"telegram"}',
    '',
  ])
})

test('the pending notices it reports are those a restarted gateway delivers', () => {
  const reported = JSON.parse(cli('inspect', db, '--json').stdout).pendingNotices
  const copy = path.join(dir, 'copy.sqlite')
  fs.copyFileSync(db, copy)
  const state = new SessionState(copy, { clock: () => T })
  try {
    expect(state.sweep().notices).toBe(2)
    expect(state.peek(PARENT)).toStrictEqual(reported)
  } finally {
    state.close()
  }
})

/**
 * A file's bytes read by another process: a handle of this process on a file the store holds
 * is a foreign handle (its close drops the store's locks), so the test never opens one.
 */
function outsideBytes(file: string): Buffer {
  return execFileSync('cat', [file])
}

test('a database a gateway holds open is read through its WAL and not written', () => {
  const live = path.join(dir, 'live.sqlite')
  const state = new SessionState(live, { clock: () => T, strict: true })
  try {
    state.record({ sessionKey: CHILD, kind: 'created', actorType: 'system', summary: 'open' })
    expect(fs.existsSync(`${live}-wal`)).toBe(true)
    const main = outsideBytes(live)
    const wal = outsideBytes(`${live}-wal`)
    const out = cli('inspect', live, '--json')
    expect(out.status).toBe(0)
    const report = JSON.parse(out.stdout)
    expect(report.wal).toBe(true)
    expect(report.counts.events).toBe(1)
    expect(outsideBytes(live).equals(main)).toBe(true)
    expect(outsideBytes(`${live}-wal`).equals(wal)).toBe(true)
  } finally {
    state.close()
  }
})

describe('failures', () => {
  test('a missing file: exit 1, ERR_DB, and the file is not created', () => {
    const missing = path.join(dir, 'missing.sqlite')
    for (const args of [['inspect', missing], ['events', missing, CHILD]]) {
      const out = cli(...args)
      expect(out.status).toBe(1)
      expect(out.stdout).toBe('')
      expect(out.stderr).toMatch(/\(ERR_DB\)\n$/)
    }
    const json = cli('inspect', missing, '--json')
    expect(json.status).toBe(1)
    expect(JSON.parse(json.stderr).error.code).toBe('ERR_DB')
    expect(fs.existsSync(missing)).toBe(false)
    expect(fs.existsSync(`${missing}-wal`)).toBe(false)
  })

  test('a file or folder that is not SQLite: exit 1, ERR_NOT_SQLITE, left as it was', () => {
    const text = path.join(dir, 'notes.txt')
    fs.writeFileSync(text, 'not a database\n')
    for (const target of [text, dir]) {
      const out = cli('inspect', target, '--json')
      expect(out.status).toBe(1)
      expect(out.stdout).toBe('')
      expect(JSON.parse(out.stderr).error.code).toBe('ERR_NOT_SQLITE')
      expect(cli('events', target, CHILD).status).toBe(1)
    }
    expect(fs.readFileSync(text, 'utf8')).toBe('not a database\n')
  })

  test.each([
    [[]],
    [['frobnicate', 'x']],
    [['inspect']],
    [['inspect', 'a.sqlite', 'b.sqlite']],
    [['inspect', 'a.sqlite', '--since', '1']],
    [['events', 'a.sqlite']],
    [['events', 'a.sqlite', CHILD, '--since', 'abc']],
    [['events', 'a.sqlite', CHILD, '--since', '-1']],
    [['events', 'a.sqlite', CHILD, '--since']],
    [['inspect', 'a.sqlite', '--bogus']],
  ])('bad usage %j: exit 2, ERR_USAGE', (args) => {
    const out = cli(...args, '--json')
    expect(out.status).toBe(2)
    expect(out.stdout).toBe('')
    expect(JSON.parse(out.stderr).error.code).toBe('ERR_USAGE')
  })

  test('arguments the addon refuses: exit 2 with its code', () => {
    const out = cli('events', db, CHILD, '--agent', 'ops', '--json')
    expect(out.status).toBe(2)
    expect(JSON.parse(out.stderr).error.code).toBe('ERR_INVALID_ARG')
  })

  test('help and version', () => {
    const help = cli('--help')
    expect(help.status).toBe(0)
    expect(help.stdout).toMatch(/^Usage:\n {2}session-awareness inspect <db \| postgres URL> \[--schema NAME\] \[--json\]\n/)
    const version = cli('--version')
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    expect(version.stdout).toBe(`${require('../package.json').version}\n`)
  })
})

describe('inspectDatabase and readEvents from JS', () => {
  test('they return what the CLI prints', () => {
    expect(inspectDatabase(db)).toStrictEqual(JSON.parse(cli('inspect', db, '--json').stdout))
    expect(readEvents(db, CHILD, { since: 1 })).toStrictEqual(
      JSON.parse(cli('events', db, CHILD, '--since', '1', '--json').stdout),
    )
    expect(readEvents(db, CHILD, null)).toStrictEqual(readEvents(db, CHILD, { since: 0 }))
  })

  const code = (f: () => unknown) => {
    try {
      f()
    } catch (e) {
      return (e as { code?: string }).code
    }
    return 'no throw'
  }

  test('arguments of the wrong type are ERR_INVALID_ARG, checked before the file', () => {
    const loose = { inspectDatabase, readEvents } as unknown as {
      inspectDatabase: (...args: unknown[]) => unknown
      readEvents: (...args: unknown[]) => unknown
    }
    const missing = path.join(dir, 'missing.sqlite')
    for (const f of [
      () => loose.inspectDatabase(42),
      () => loose.inspectDatabase(),
      () => loose.readEvents(missing, 5),
      () => loose.readEvents(missing, CHILD, 5),
      () => loose.readEvents(missing, CHILD, { since: '1' }),
      () => loose.readEvents(missing, CHILD, { agentId: 3 }),
      () => loose.readEvents(missing, '', {}),
      () => loose.readEvents(missing, CHILD, { since: 1.5 }),
      () => loose.inspectDatabase(''),
    ]) {
      expect(code(f)).toBe('ERR_INVALID_ARG')
    }
    expect(code(() => inspectDatabase(missing))).toBe('ERR_DB')
    expect(code(() => readEvents(missing, CHILD))).toBe('ERR_DB')
    expect(code(() => inspectDatabase(__filename))).toBe('ERR_NOT_SQLITE')
    expect(fs.existsSync(missing)).toBe(false)
  })
})

test('a stored payload that is not a JSON object is shown as stored, in payloadText, by readEvents and the CLI', () => {
  const file = path.join(dir, 'foreign-payload.sqlite')
  const state = new SessionState(file, { clock: () => T, strict: true })
  state.record({ sessionKey: CHILD, kind: 'created', actorType: 'system', summary: 'a', payload: { k: 1 } })
  state.record({ sessionKey: CHILD, kind: 'created', actorType: 'system', summary: 'b', payload: { k: 2 } })
  state.close()
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const Database = require('better-sqlite3')
  const raw = new Database(file)
  raw.prepare("UPDATE session_state_events SET payload_json = '[1,2]' WHERE summary = 'b'").run()
  raw.close()
  const events = readEvents(file, CHILD).events
  expect(events.map((e) => [e.payload, e.foreign === undefined ? undefined : e.payloadText])).toEqual([
    [{ k: 1 }, undefined],
    [undefined, '[1,2]'],
  ])
  expect(events[1]?.foreign).toEqual(['payload'])
  const json = JSON.parse(cli('events', file, CHILD, '--json').stdout)
  expect(json.events.map((e: Record<string, unknown>) => [e.payload, e.payloadText])).toEqual([
    [{ k: 1 }, undefined],
    [undefined, '[1,2]'],
  ])
  const text = cli('events', file, CHILD).stdout
  expect(text).toContain('"a"  {"k":1}')
  expect(text).toContain('"b"  [1,2]')
})
