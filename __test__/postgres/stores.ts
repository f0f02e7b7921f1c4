// Stores of both kinds for the suites that run the Promise API over each: a fresh SQLite
// file, or a fresh schema of its own on the file's throwaway PostgreSQL cluster. Every store
// opened here is closed after its test.
import { SessionState, fixture, type SessionStateOptions } from '../helpers'
import { usePostgres, type Cluster } from './server'

/** The two kinds of store. */
export const KINDS = ['sqlite', 'postgres'] as const
/** One of {@link KINDS}. */
export type Kind = (typeof KINDS)[number]

/** Where a store lives: what `SessionState.open` takes to open it (again). */
export interface Place {
  kind: Kind
  path: string
  options: SessionStateOptions
}

/** Both kinds for one test file: a temp dir and a cluster, started once for the file. */
export function useStores(name: string) {
  const fx = fixture(name)
  const pg = usePostgres(name)
  const open: SessionState[] = []
  let schemas = 0
  afterEach(async () => {
    for (const s of open.splice(0)) await s.closeAsync().catch(() => {})
  })
  const api = {
    /** The cluster (for statements behind the API's back). */
    cluster(): Cluster {
      return pg.get()
    },
    /** A fresh place of `kind`: nothing exists there yet. */
    place(kind: Kind): Place {
      if (kind === 'sqlite') return { kind, path: fx.file(), options: {} }
      schemas += 1
      return { kind, path: pg.get().url, options: { schema: `${name.replace(/\W/g, '_')}_${schemas}` } }
    },
    /** Opens the store at `place` with `options` added; closed after the test. */
    async at(place: Place, options: SessionStateOptions = {}): Promise<SessionState> {
      const s = await SessionState.open(place.path, { ...place.options, ...options })
      open.push(s)
      return s
    },
    /** Opens a store at a fresh place of `kind`. */
    async open(kind: Kind, options: SessionStateOptions = {}): Promise<SessionState> {
      return api.at(api.place(kind), options)
    },
  }
  return api
}
