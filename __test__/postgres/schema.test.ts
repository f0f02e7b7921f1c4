// The PostgreSQL store's schema (crates/core/src/postgres/schema.sql) on a real server: two
// gateways applying it at once both succeed (and without its advisory lock the second fails:
// the negative control), a second run changes nothing, nothing outside its schema is created,
// and roles with the minimal rights of docs/postgres.md#rights create, use or only read it.
import type { Client } from 'pg'

import { applySchema, checkSchemaName, DEFAULT_SCHEMA, schemaSql } from '../../scripts/pg/schema'
import { backendPidOf, connect, untilBlocked, usePostgres } from './server'

const pg = usePostgres('schema')

const clients: Client[] = []
const pids = new WeakMap<Client, number>()
/** `n` clients of `user` (trust authentication), each with its backend pid read. */
async function open(n: number, user = 'postgres'): Promise<Client[]> {
  const url = pg.get().url.replace('postgres@', `${user}@`)
  const out: Client[] = []
  for (let i = 0; i < n; i++) {
    const c = await connect(url, 'schema')
    pids.set(c, await backendPidOf(c))
    out.push(c)
  }
  clients.push(...out)
  return out
}
function pidOf(c: Client): number {
  const pid = pids.get(c)
  if (pid === undefined) throw new Error('a client not opened by open()')
  return pid
}
afterEach(async () => {
  for (const c of clients.splice(0)) await c.end().catch(() => {})
})

/** Every column of the schema's tables as `table.column type [not null]`, in order. */
async function columns(c: Client, schema: string): Promise<string[]> {
  const r = await c.query<{ line: string }>(
    `SELECT table_name || '.' || column_name || ' ' || data_type ||
       CASE WHEN is_nullable = 'NO' THEN ' not null' ELSE '' END ||
       CASE WHEN is_identity = 'YES' THEN ' identity ' || identity_generation ELSE '' END AS line
     FROM information_schema.columns WHERE table_schema = $1 ORDER BY table_name, ordinal_position`,
    [schema],
  )
  return r.rows.map((row) => row.line)
}

/** Every index of the schema as `table: definition` (names included). */
async function indexes(c: Client, schema: string): Promise<string[]> {
  const r = await c.query<{ line: string }>(
    `SELECT tablename || ': ' || replace(indexdef, $1 || '.', '') AS line FROM pg_indexes
     WHERE schemaname = $1 ORDER BY tablename, indexname`,
    [schema],
  )
  return r.rows.map((row) => row.line)
}

/** Every relation of the database outside `schema` and the server's own (catalog, TOAST). */
async function outside(c: Client, schema: string): Promise<string[]> {
  const r = await c.query<{ line: string }>(
    `SELECT n.nspname || '.' || c.relname || ':' || c.oid AS line FROM pg_class c
     JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname NOT IN ($1, 'pg_catalog', 'information_schema', 'pg_toast') ORDER BY 1`,
    [schema],
  )
  const spaces = await c.query<{ line: string }>('SELECT nspname || \':\' || oid AS line FROM pg_namespace ORDER BY 1')
  return [...r.rows.map((row) => row.line), ...spaces.rows.map((row) => row.line).filter((l) => !l.startsWith(`${schema}:`))]
}

const EXPECTED_COLUMNS = [
  'session_awareness_meta.meta_key text not null',
  'session_awareness_meta.meta_value text not null',
  'session_awareness_served.watcher_key text not null',
  'session_awareness_served.instance_id text not null',
  'session_awareness_served.expires_at bigint not null',
  'session_state_events.sequence bigint not null identity BY DEFAULT',
  'session_state_events.dedupe_key text',
  'session_state_events.session_key text not null',
  'session_state_events.session_id text',
  'session_state_events.agent_id text not null',
  'session_state_events.kind text not null',
  'session_state_events.actor_type text not null',
  'session_state_events.actor_id text',
  'session_state_events.run_id text',
  'session_state_events.occurred_at bigint not null',
  'session_state_events.summary text not null',
  'session_state_events.payload_json text',
  'session_state_heads.session_key text not null',
  'session_state_heads.agent_id text not null',
  'session_state_heads.last_sequence bigint not null',
  'session_state_heads.pruned_max_sequence bigint not null',
  'session_state_heads.updated_at bigint not null',
  'session_upstream_links.session_key text not null',
  'session_upstream_links.agent_id text not null',
  'session_upstream_links.catalog_id text not null',
  'session_upstream_links.host_id text not null',
  'session_upstream_links.thread_id text not null',
  'session_upstream_links.upstream_kind text not null',
  'session_upstream_links.upstream_ref_json text',
  'session_upstream_links.last_marker_json text',
  'session_upstream_links.last_scanned_at bigint',
  'session_upstream_links.created_at bigint not null',
  'session_upstream_links.updated_at bigint not null',
  'session_upstream_links.failure_count integer',
  'session_upstream_links.own_messages_json text',
  'session_upstream_links.scan_host text',
  'session_watch_cursors.watcher_session_key text not null',
  'session_watch_cursors.watcher_store_path text',
  'session_watch_cursors.target_session_key text not null',
  'session_watch_cursors.last_seen_sequence bigint not null',
  'session_watch_cursors.notified_sequence bigint not null',
  'session_watch_cursors.material_sequence bigint not null',
  'session_watch_cursors.provenance text not null',
  'session_watch_cursors.updated_at bigint not null',
]

const EXPECTED_INDEXES = [
  'session_awareness_meta: CREATE UNIQUE INDEX session_awareness_meta_pkey ON session_awareness_meta USING btree (meta_key)',
  'session_awareness_served: CREATE UNIQUE INDEX session_awareness_served_pkey ON session_awareness_served USING btree (watcher_key, instance_id)',
  'session_state_events: CREATE INDEX idx_session_state_events_session_sequence ON session_state_events USING btree (session_key, agent_id, sequence)',
  'session_state_events: CREATE INDEX idx_session_state_events_time ON session_state_events USING btree (occurred_at, sequence)',
  'session_state_events: CREATE UNIQUE INDEX session_state_events_dedupe_key_key ON session_state_events USING btree (dedupe_key)',
  'session_state_events: CREATE UNIQUE INDEX session_state_events_pkey ON session_state_events USING btree (sequence)',
  'session_state_heads: CREATE UNIQUE INDEX session_state_heads_pkey ON session_state_heads USING btree (session_key, agent_id)',
  'session_upstream_links: CREATE INDEX idx_session_upstream_links_catalog_id ON session_upstream_links USING btree (catalog_id)',
  'session_upstream_links: CREATE UNIQUE INDEX session_upstream_links_pkey ON session_upstream_links USING btree (session_key, agent_id)',
  'session_watch_cursors: CREATE INDEX idx_session_watch_cursors_target ON session_watch_cursors USING btree (target_session_key)',
  'session_watch_cursors: CREATE UNIQUE INDEX session_watch_cursors_pkey ON session_watch_cursors USING btree (watcher_session_key, target_session_key)',
]

test('two gateways opening at once both succeed, five rounds; the tables and indexes are the file\'s; a second run changes nothing', async () => {
  const [a, b, admin] = await open(3)
  for (let round = 0; round < 5; round++) {
    const schema = round === 0 ? DEFAULT_SCHEMA : `sa_concurrent_${round}`
    const before = await outside(admin, schema)
    await Promise.all([applySchema(a, schema), applySchema(b, schema)])
    expect(await columns(admin, schema)).toEqual(EXPECTED_COLUMNS)
    expect(await indexes(admin, schema)).toEqual(EXPECTED_INDEXES.map((l) => l.replaceAll(`${DEFAULT_SCHEMA}.`, '')))
    const meta = await admin.query(`SELECT meta_key, meta_value FROM ${schema}.session_awareness_meta`)
    expect(meta.rows).toEqual([{ meta_key: 'schema_version', meta_value: '1' }])
    expect(await outside(admin, schema)).toEqual(before)
    // Again: nothing new, nothing replaced (same oids).
    const shape = await admin.query(`SELECT relname, oid::int FROM pg_class WHERE relnamespace = $1::regnamespace ORDER BY 1`, [schema])
    await applySchema(a, schema)
    expect((await admin.query(`SELECT relname, oid::int FROM pg_class WHERE relnamespace = $1::regnamespace ORDER BY 1`, [schema])).rows).toEqual(shape.rows)
  }
})

test('negative control: without the advisory lock, a concurrent second CREATE of the schema fails with 23505', async () => {
  const [t1, t2, admin] = await open(3)
  const noLock = schemaSql('sa_unlocked').replace(/^SELECT pg_advisory_xact_lock.*$/m, '')
  expect(noLock).not.toContain('pg_advisory_xact_lock')
  await t1.query('BEGIN')
  await t1.query(noLock)
  await t2.query('BEGIN')
  const second = t2.query(noLock).then(
    () => 'ok',
    (e: { code?: string }) => e.code,
  )
  await untilBlocked(admin, pidOf(t2), pidOf(t1))
  await t1.query('COMMIT')
  expect(await second).toBe('23505')
  await t2.query('ROLLBACK')
})

test('with the lock, the second opener waits for the first and finds the finished shape', async () => {
  const [t1, t2, admin] = await open(3)
  await t1.query('BEGIN')
  await t1.query(schemaSql('sa_locked'))
  const second = applySchema(t2, 'sa_locked')
  await untilBlocked(admin, pidOf(t2), pidOf(t1))
  const waiting = await admin.query<{ wait: string }>('SELECT wait_event AS wait FROM pg_stat_activity WHERE pid = $1', [pidOf(t2)])
  expect(waiting.rows).toEqual([{ wait: 'advisory' }])
  await t1.query('COMMIT')
  await second
  expect(await columns(admin, 'sa_locked')).toEqual(EXPECTED_COLUMNS)
})

test('a role that owns only its schema (no superuser, no CREATE on the database) applies it and uses it, and can create nothing elsewhere', async () => {
  const [admin] = await open(1)
  await admin.query('CREATE ROLE sa_owner LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE')
  await admin.query('CREATE SCHEMA sa_owned AUTHORIZATION sa_owner')
  const [gw] = await open(1, 'sa_owner')
  await applySchema(gw, 'sa_owned')
  await applySchema(gw, 'sa_owned')
  expect(await columns(admin, 'sa_owned')).toEqual(EXPECTED_COLUMNS)
  await gw.query(`INSERT INTO sa_owned.session_state_heads VALUES ('s', 'main', 0, 0, 1)`)
  const ev = await gw.query<{ sequence: string }>(
    `INSERT INTO sa_owned.session_state_events (session_key, agent_id, kind, actor_type, occurred_at, summary)
     VALUES ('s', 'main', 'message', 'user', 1, 'hi') RETURNING sequence`,
  )
  expect(ev.rows).toEqual([{ sequence: '1' }])
  const owners = await admin.query<{ owner: string }>(
    `SELECT DISTINCT pg_get_userbyid(relowner) AS owner FROM pg_class WHERE relnamespace = 'sa_owned'::regnamespace`,
  )
  expect(owners.rows).toEqual([{ owner: 'sa_owner' }])
  const refused = (q: string) => gw.query(q).then(() => 'ok', (e: { code?: string }) => e.code)
  expect(await refused('CREATE TABLE public.x (n int)')).toBe('42501')
  expect(await refused('CREATE SCHEMA sa_other')).toBe('42501')
  await expect(applySchema(gw, 'sa_elsewhere')).rejects.toMatchObject({ code: '42501' })
})

test('a role with CREATE on the database creates the schema itself and owns it', async () => {
  const [admin] = await open(1)
  await admin.query('CREATE ROLE sa_creator LOGIN NOSUPERUSER; GRANT CREATE ON DATABASE postgres TO sa_creator')
  const [gw] = await open(1, 'sa_creator')
  await applySchema(gw, 'sa_created')
  const owner = await admin.query(`SELECT pg_get_userbyid(nspowner) AS owner FROM pg_namespace WHERE nspname = 'sa_created'`)
  expect(owner.rows).toEqual([{ owner: 'sa_creator' }])
  expect(await columns(admin, 'sa_created')).toEqual(EXPECTED_COLUMNS)
})

test('a read-only role (USAGE and SELECT) reads the tables and can write nothing', async () => {
  const [admin] = await open(1)
  await applySchema(admin, 'sa_read')
  await admin.query(`INSERT INTO sa_read.session_state_heads VALUES ('s', 'main', 3, 0, 1)`)
  await admin.query('CREATE ROLE sa_reader LOGIN NOSUPERUSER; GRANT USAGE ON SCHEMA sa_read TO sa_reader; GRANT SELECT ON ALL TABLES IN SCHEMA sa_read TO sa_reader')
  const [ro] = await open(1, 'sa_reader')
  const heads = await ro.query('SELECT session_key, last_sequence::int AS n FROM sa_read.session_state_heads')
  expect(heads.rows).toEqual([{ session_key: 's', n: 3 }])
  await expect(ro.query(`UPDATE sa_read.session_state_heads SET last_sequence = 4`)).rejects.toMatchObject({ code: '42501' })
})

test('schema names: plain lowercase identifiers only', () => {
  expect(checkSchemaName('session_awareness')).toBe('session_awareness')
  expect(checkSchemaName('_a1')).toBe('_a1')
  for (const bad of ['', 'Session', 'a-b', '1a', 'pg_x', 'a'.repeat(64), 'a"b', "a'b", 'a b']) {
    expect(() => checkSchemaName(bad)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARG' }))
  }
  expect(checkSchemaName('a'.repeat(63))).toHaveLength(63)
})
