// A KNOWN LIMIT, kept visible: another copy of SQLite in the same process (better-sqlite3,
// node:sqlite) must not open the store's file. POSIX locks belong to the process, so the two
// copies never see each other's locks: a record made while the other copy holds a write
// transaction does not wait, returns its event, and the events are gone once both close.
// See RELIABILITY.md, "Limits". `test.failing` passes while the limit stands; if it is ever
// lifted, this test fails and should become a plain `test`.
import * as fs from 'node:fs'
import * as path from 'node:path'

import { SessionState } from '../../lib'
import { rawDb, tempDir } from './support'

let dir = ''
beforeAll(() => {
  dir = tempDir('same-process')
})
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }))

test.failing('a store keeps its events when the host writes the same file through its own SQLite', () => {
  const file = path.join(dir, 'shared.sqlite')
  const state = new SessionState(file, { busyTimeoutMs: 500 })
  const host = rawDb(file)
  const returned: number[] = []
  try {
    host.exec('CREATE TABLE IF NOT EXISTS gateway_rows (k TEXT NOT NULL)')
    for (let round = 0; round < 20; round += 1) {
      host.exec('BEGIN IMMEDIATE')
      host.prepare('INSERT INTO gateway_rows VALUES (?)').run(`row ${round}`)
      // With the host in another process this would wait for the host's commit.
      const e = state.record({ sessionKey: 'agent:main:x', kind: 'run_completed', actorType: 'agent', summary: `r${round}` })
      if (e !== null) returned.push(e.sequence)
      host.exec('COMMIT')
    }
  } finally {
    host.close()
    state.close()
  }
  const reopened = new SessionState(file)
  try {
    expect(reopened.changesSince('agent:main:x', 0).stateChanges.events.map((e) => e.sequence)).toEqual(returned)
    expect(returned).toHaveLength(20)
  } finally {
    reopened.close()
  }
})
