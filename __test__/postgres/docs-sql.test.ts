// docs/postgres.md's rights, as an operator runs them: every ```sql block of the document,
// verbatim and in its order, on a fresh database `app` of a throwaway cluster before the
// gateway's first open; then the gateway's role opens the store (creating its tables) and
// records, and `inspect` as the read-only role reads what it wrote (docs/postgres.md#rights).
import * as fs from 'node:fs'
import * as path from 'node:path'

import { Client } from 'pg'

import { SessionState, inspectDatabase } from '../../lib'
import { cli } from '../cli-store'
import { human } from '../helpers'
import { usePostgres } from './server'

const pg = usePostgres('docssql')

/** The document's SQL code blocks, as written. */
function sqlBlocks(): string[] {
  const doc = fs.readFileSync(path.join(__dirname, '..', '..', 'docs', 'postgres.md'), 'utf8')
  return [...doc.matchAll(/```sql\n([\s\S]*?)```/g)].map((m) => m[1] as string)
}

/** The cluster's URL as `role`, on the database `app` (trust authentication on the test cluster). */
function app(role: string): string {
  return pg
    .get()
    .url.replace('postgres@', `${role}@`)
    .replace(/\/postgres(\?|$)/, '/app$1')
}

test("the docs' SQL, run verbatim before the first open, lets the gateway create its tables and the reader inspect them", async () => {
  await pg.get().sql('CREATE DATABASE app')
  const blocks = sqlBlocks()
  expect(blocks).toHaveLength(1)
  const admin = new Client({ connectionString: app('postgres') })
  await admin.connect()
  try {
    // One simple query per block: its statements run in order, as psql would run them.
    for (const block of blocks) await admin.query(block)
  } finally {
    await admin.end()
  }
  const s = await SessionState.open(app('gateway'))
  expect((await s.recordAsync(human('agent:main:subagent:c')))?.sequence).toBe(1)
  await s.watchAsync('agent:main:main', 'agent:main:subagent:c')
  await s.closeAsync()
  const reader = app('gateway_reader')
  const report = inspectDatabase(reader)
  expect(report.counts).toEqual({ events: 1, heads: 1, cursors: 1, upstreamLinks: 0 })
  const out = cli('inspect', reader, '--json')
  expect(out.stderr).toBe('')
  expect(out.status).toBe(0)
  expect(JSON.parse(out.stdout).counts).toEqual(report.counts)
  // The reader may read and nothing more.
  const r = new Client({ connectionString: reader })
  await r.connect()
  try {
    await expect(r.query('DELETE FROM session_awareness.session_state_events')).rejects.toMatchObject({ code: '42501' })
  } finally {
    await r.end()
  }
}, 60_000)
