// Upstream links in OpenClaw's table (semantics.md#storage, semantics.md#upstream) from JS: adopt, the transcript scan and
// checkUpstream on a copy of the file OpenClaw 2026.9.6 wrote
// (crates/core/tests/fixtures/openclaw-2026.9.6.sqlite) and on a fresh file, and `adopt` as one
// transaction. `npm run test:openclaw` also has OpenClaw's own code read the rows back.
import { appendFileSync, copyFileSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import { SessionState, StateEvent } from '../lib'
import { rawDb } from './helpers'

const FIXTURE = join(__dirname, '../crates/core/tests/fixtures/openclaw-2026.9.6.sqlite')
/** The highest sequence OpenClaw wrote into the fixture. */
const OC_HEAD = 13
// An hour after OpenClaw's last write to the fixture: the store's retention (30 days) keeps
// OpenClaw's rows, as it would in a gateway that moved to the store that day.
const T =
  Math.max(
    ...Object.values(
      JSON.parse(readFileSync(FIXTURE.replace(/\.sqlite$/, '.json'), 'utf8')).rows as Record<
        string,
        Array<{ updated_at?: number; occurred_at?: number }>
      >,
    )
      .flat()
      .map((r) => r.updated_at ?? r.occurred_at ?? 0),
  ) + 3_600_000
const MAIN = 'agent:main:main'
const LOCAL = 'agent:main:claude:adopted-local'
const REMOTE = 'agent:main:claude:adopted-remote'
const THREAD = '0d9e8f7a-6b5c-4d3e-8f21-a0b1c2d3e4f5'
const human = (text: string) => JSON.stringify({ type: 'user', message: { role: 'user', content: text } }) + '\n'
const item = (uuid: string, text: string) => ({ uuid, type: 'user', message: { role: 'user', content: text } })

let dir: string
let db: string
let stores: SessionState[] = []
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'sa-upstream-oc-'))
  db = join(dir, 'state.sqlite')
})
afterEach(() => {
  for (const s of stores) s.close()
  stores = []
  rmSync(dir, { recursive: true, force: true })
})

function open(now: { t: number }, errors: string[] = [], strict = false) {
  const s = new SessionState(db, { clock: () => now.t, onError: (e) => errors.push(e.code), strict })
  stores.push(s)
  return s
}

/** The link rows, store and OpenClaw columns, as better-sqlite3 reads them (no store open). */
function linkRows() {
  const conn = rawDb(db)
  try {
    return conn
      .prepare(
        `SELECT session_key, agent_id, catalog_id, host_id, thread_id, upstream_kind, upstream_ref_json,
                last_marker_json, last_scanned_at, failure_count, own_messages_json
         FROM session_upstream_links ORDER BY session_key, agent_id`,
      )
      .all()
  } finally {
    conn.close()
  }
}

describe.each([
  ['a fresh file', false, 0],
  ["OpenClaw's file", true, OC_HEAD],
])('on %s', (_name, openclaw, base) => {
  beforeEach(() => {
    if (openclaw) copyFileSync(FIXTURE, db)
  })

  test('adopt, scan and checkUpstream keep OpenClaw-shaped rows', () => {
    const now = { t: T }
    const errors: string[] = []
    const s = open(now, errors)
    const transcript = join(dir, `${THREAD}.jsonl`)
    appendFileSync(transcript, human('history'))
    const adopted = s.adopt(LOCAL, { source: 'claude', transcriptPath: transcript }) as StateEvent
    expect([adopted.sequence, adopted.kind]).toEqual([base + 1, 'adopted'])
    expect(s.watch(MAIN, LOCAL)).toBe(true)
    appendFileSync(transcript, human('typed in the terminal'))
    now.t = T + 1
    const scanned = s.scanUpstream().filter((e) => e.sessionKey === LOCAL)
    expect(scanned.map((e) => [e.sequence, e.kind, e.summary])).toEqual([
      [base + 2, 'human_direct_message', 'human message via claude'],
    ])

    now.t = T + 2
    expect(s.adopt(REMOTE, { source: 'claude', remoteId: THREAD, hostId: 'node:n1' })?.sequence).toBe(base + 3)
    now.t = T + 3
    expect(s.checkUpstream(REMOTE, { found: true, items: [item('u-1', 'old')] })).toBeNull()
    now.t = T + 4
    const fresh = s.checkUpstream(REMOTE, { found: true, items: [item('u-1', 'old'), item('u-2', 'new')] })
    expect([fresh?.sequence, fresh?.kind, fresh?.payload]).toEqual([base + 4, 'human_direct_message', { turns: 1 }])
    s.close()

    const rows = linkRows()
    const row = (k: string) => rows.find((r) => r.session_key === k)
    expect(row(LOCAL)).toEqual({
      session_key: LOCAL,
      agent_id: 'main',
      catalog_id: 'claude',
      host_id: 'gateway:local',
      thread_id: THREAD,
      upstream_kind: 'claude-cli',
      upstream_ref_json: JSON.stringify({ filePath: transcript }),
      last_marker_json: JSON.stringify({ offset: statSync(transcript).size }),
      last_scanned_at: T + 1,
      failure_count: 0,
      own_messages_json: '[]',
    })
    expect(row(REMOTE)).toEqual({
      session_key: REMOTE,
      agent_id: 'main',
      catalog_id: 'claude',
      host_id: 'node:n1',
      thread_id: THREAD,
      upstream_kind: 'claude-cli',
      upstream_ref_json: JSON.stringify({ nodeId: 'n1', threadId: THREAD }),
      last_marker_json: JSON.stringify({ uuid: 'u-2' }),
      last_scanned_at: T + 4,
      failure_count: 0,
      own_messages_json: '[]',
    })

    // Three failed checks: upstream_missing (it notifies nobody here) and no link.
    const again = open(now, errors)
    expect(again.checkUpstream(REMOTE, { found: false })).toBeNull()
    expect(again.checkUpstream(REMOTE, { found: 'unknown' })).toBeNull()
    expect(again.checkUpstream(REMOTE, { found: false })).toBeNull()
    const missing = again.checkUpstream(REMOTE, { found: false })
    expect([missing?.sequence, missing?.kind, missing?.summary]).toEqual([
      base + 5,
      'upstream_missing',
      'upstream missing via claude',
    ])
    again.close()
    expect(linkRows().map((r) => r.session_key)).not.toContain(REMOTE)
    expect(errors).toEqual([])
  })

  test('adopt is one transaction: a refused link leaves no event', () => {
    const now = { t: T }
    new SessionState(db).close()
    const conn = rawDb(db)
    conn.exec(
      "CREATE TRIGGER refuse_links BEFORE INSERT ON session_upstream_links BEGIN SELECT RAISE(ABORT, 'refused'); END",
    )
    conn.close()
    const before = linkRows()
    const errors: string[] = []
    const s = open(now, errors)
    expect(s.adopt(LOCAL, { source: 'claude', remoteId: THREAD })).toBeNull()
    expect(errors).toEqual(['ERR_DB'])
    expect(s.stateVersion(LOCAL)).toBe(0)
    expect(s.changesSince(LOCAL, 0).stateChanges.events).toEqual([])
    const strict = open(now, [], true)
    expect(() => strict.adopt(LOCAL, { source: 'claude', remoteId: THREAD })).toThrow(
      expect.objectContaining({ code: 'ERR_DB' }),
    )
    // The next event takes the next sequence: nothing was committed in between.
    expect(s.record({ sessionKey: LOCAL, kind: 'compacted', actorType: 'system', summary: 'after' })?.sequence).toBe(
      base + 1,
    )
    s.close()
    strict.close()
    expect(linkRows()).toEqual(before)
  })
})

test('hostId must be a string: null and one ERR_INVALID_ARG, nothing written; empty means the default', () => {
  const now = { t: T }
  const errors: string[] = []
  const s = open(now, errors)
  expect(s.adopt(REMOTE, { source: 'claude', remoteId: THREAD, hostId: 5 as unknown as string })).toBeNull()
  expect(errors).toEqual(['ERR_INVALID_ARG'])
  expect(s.stateVersion(REMOTE)).toBe(0)
  expect(s.adopt(REMOTE, { source: 'claude', remoteId: THREAD, hostId: '' })?.sequence).toBe(1)
  s.close()
  expect(linkRows().map((r) => [r.host_id, r.upstream_ref_json, r.last_marker_json])).toEqual([
    ['remote', JSON.stringify({ threadId: THREAD }), null],
  ])
})
