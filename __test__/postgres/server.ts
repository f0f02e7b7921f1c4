// A throwaway PostgreSQL cluster per test file (scripts/pg/cluster.js): started before the
// file's tests, stopped after them, and by the cluster's watchdog if the process dies first.
import { Client } from 'pg'

import { startCluster, type Cluster } from '../../scripts/pg/cluster'
import { startPgBouncer, type PgBouncer } from '../../scripts/pg/pgbouncer'

export type { Cluster }

/**
 * Starts a cluster named `name` for this file; `get()` returns it inside tests. With
 * `SESSION_AWARENESS_PG_POOLER=session` (scripts/test.sh runs the cross-host suites so) a
 * PgBouncer in session mode stands in front of it, and the cluster's `url` is the pooler's:
 * the stores and the tests' own clients go through it; `sql()` and `passwordUrl` stay direct.
 */
export function usePostgres(name: string): { get(): Cluster } {
  let cluster: Cluster | undefined
  let pooler: PgBouncer | undefined
  beforeAll(async () => {
    cluster = await startCluster({ name })
    const mode = process.env.SESSION_AWARENESS_PG_POOLER
    if (mode) {
      if (mode !== 'session') throw new Error(`SESSION_AWARENESS_PG_POOLER=${mode}: only session mode serves a store`)
      pooler = await startPgBouncer(cluster, { mode })
      Object.defineProperty(cluster, 'url', { value: pooler.url, enumerable: true })
    }
  }, 60000)
  afterAll(async () => {
    await pooler?.stop()
    await cluster?.stop()
  }, 60000)
  return {
    get() {
      if (!cluster) throw new Error('the cluster did not start')
      return cluster
    },
  }
}

/** A connected client of `url` with `application_name` `app`, ended by `end()` or by the test. */
export async function connect(url: string, app = 'sa-test'): Promise<Client> {
  const client = new Client({ connectionString: url, application_name: app })
  // An error on an idle client (its backend killed) is expected in these tests; the query
  // that was waiting rejects on its own.
  client.on('error', () => {})
  await client.connect()
  return client
}

/** Waits until backend `waiter` is blocked by backend `holder` (pg_blocking_pids), asking on `admin`. */
export async function untilBlocked(admin: Client, waiter: number, holder: number): Promise<void> {
  for (let i = 0; i < 400; i++) {
    const r = await admin.query<{ b: number[] }>('SELECT pg_blocking_pids($1) AS b', [waiter])
    if (r.rows[0].b.includes(holder)) return
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
  throw new Error(`backend ${waiter} never waited for ${holder}`)
}

/** The backend pid of a connected client (ask before it runs anything else). */
export async function backendPidOf(client: Client): Promise<number> {
  return (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0].pid
}
