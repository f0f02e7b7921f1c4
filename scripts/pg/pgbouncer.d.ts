import type { Cluster } from './cluster'

/** PgBouncer's pool modes. */
export type PoolMode = 'session' | 'transaction' | 'statement'

/** What {@link startPgBouncer} resolves to: a running throwaway PgBouncer. */
export interface PgBouncer {
  /** The cluster's superuser URL through the pooler. */
  readonly url: string
  /** Its TCP port on 127.0.0.1. */
  readonly port: number
  /** Its `pool_mode`. */
  readonly mode: PoolMode
  /** Its pid. */
  readonly pid: number
  /** Stops it and removes its dir. Safe to call twice. */
  stop(): Promise<void>
}

/** Starts PgBouncer on 127.0.0.1 and a free port in front of `cluster`, in `mode` (default `session`), with `poolSize` (default 20) server connections per database and user. */
export function startPgBouncer(cluster: Pick<Cluster, 'port'>, options?: { mode?: PoolMode; poolSize?: number }): Promise<PgBouncer>
/** The pgbouncer program; throws {@link PGBOUNCER_HINT} when there is none. */
export function pgbouncerBin(): string
/** The one line a machine without PgBouncer gets. */
export const PGBOUNCER_HINT: string
