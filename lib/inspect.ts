/**
 * Read-only inspection of a database file: what the `session-awareness` command-line tool
 * prints, as plain objects.
 * @packageDocumentation
 */
import * as native from '../index.js'
import type { DatabaseInspection, InspectOptions, ReadEventsOptions } from '../index.js'
import * as a from './args'
import { fromNative } from './errors'
import * as packed from './packed'
import type { ChangeEvent } from './types'

export type {
  DatabaseInspection,
  InspectOptions,
  InspectedCursor,
  InspectedEvent,
  InspectedSession,
  ReadEventsOptions,
  RowCounts,
} from '../index.js'

/** A session's stored events after a version, read-only and unbounded (`readEvents`). */
export interface SessionEvents {
  /** The session. */
  sessionKey: string
  /** The agent the events were read for. */
  agentId: string
  /** The state version (0 when the session has no head). */
  stateVersion: number
  /** The pruned watermark. */
  prunedMaxSequence: number
  /**
   * True when `since` predates retained history (`since < prunedMaxSequence`), or a stored row
   * could not be answered (semantics.md#reading-foreign-events).
   */
  historyGap: boolean
  /**
   * Every stored event row with `sequence > since`, ascending, each as `changesSince` answers
   * it: a row the store would not write is a `ForeignStateEvent`.
   */
  events: ChangeEvent[]
}

/**
 * Reads a report of the database at `path` without changing it: sessions with their state
 * version and pruned watermark, cursors with L/N/M and lag, pending notices, row counts and
 * the oldest retained event. Never creates the file. Throws `ERR_DB` for a missing or
 * unreadable file, `ERR_NOT_SQLITE` for one that is not a SQLite database, and
 * `ERR_FILE_SHARED` when another SQLite library of this process has it open.
 *
 * `path` may be a `postgres://` URL: the report then reads the tables of the store's schema
 * (`options.schema`, default `session_awareness`) in one read-only snapshot, which a role
 * with only `SELECT` on them may take (docs/postgres.md#rights); the call waits for the
 * server, up to its connect and statement timeouts. Its `path` is the URL without its
 * password, `fileBytes` the tables' size on the server. `ERR_DB` when the server cannot be
 * reached or refuses; `schema` on a file is `ERR_INVALID_ARG`.
 */
export function inspectDatabase(path: string, options?: InspectOptions | null): DatabaseInspection {
  a.str(path, 'path')
  const o = a.opts(options, 'options', 'inspectDatabase')
  const checked = { schema: a.optStr(o?.schema, 'schema') }
  try {
    return native.inspectDatabase(path, checked)
  } catch (e) {
    throw fromNative(e)
  }
}

/**
 * Reads a session's events after `options.since`, ascending, without changing the file (or,
 * on a `postgres://` URL, the store's schema `options.schema`, read-only, as
 * {@link inspectDatabase}). Throws `ERR_INVALID_ARG` for an empty key, a bad agent or
 * `since`, and otherwise as {@link inspectDatabase}.
 */
export function readEvents(path: string, sessionKey: string, options?: ReadEventsOptions | null): SessionEvents {
  a.str(path, 'path')
  a.str(sessionKey, 'sessionKey')
  const o = a.opts(options, 'options', 'readEvents')
  const checked = {
    since: a.optNum(o?.since, 'since'),
    agentId: a.optStr(o?.agentId, 'agentId'),
    schema: a.optStr(o?.schema, 'schema'),
  }
  try {
    const r = native.readEvents(path, sessionKey, checked)
    return {
      sessionKey: r.sessionKey,
      agentId: r.agentId,
      stateVersion: r.stateVersion,
      prunedMaxSequence: r.prunedMaxSequence,
      historyGap: r.historyGap,
      events: packed.events(r.rows),
    }
  } catch (e) {
    throw fromNative(e)
  }
}
