/**
 * Read-only inspection of a database file: what the `session-awareness` command-line tool
 * prints, as plain objects.
 * @packageDocumentation
 */
import * as native from '../index.js'
import type { DatabaseInspection, ReadEventsOptions, SessionEvents } from '../index.js'
import * as a from './args'
import { fromNative } from './errors'

export type {
  DatabaseInspection,
  InspectedCursor,
  InspectedEvent,
  InspectedSession,
  ReadEventsOptions,
  RowCounts,
  SessionEvents,
} from '../index.js'

/**
 * Reads a report of the database at `path` without changing it: sessions with their state
 * version and pruned watermark, cursors with L/N/M and lag, pending notices, row counts and
 * the oldest retained event. Never creates the file. Throws `ERR_DB` for a missing or
 * unreadable file, `ERR_NOT_SQLITE` for one that is not a SQLite database, and
 * `ERR_FILE_SHARED` when another SQLite library of this process has it open.
 */
export function inspectDatabase(path: string): DatabaseInspection {
  a.str(path, 'path')
  try {
    return native.inspectDatabase(path)
  } catch (e) {
    throw fromNative(e)
  }
}

/**
 * Reads a session's events after `options.since`, ascending, without changing the file.
 * Throws `ERR_INVALID_ARG` for an empty key, a bad agent or `since`, and otherwise as
 * {@link inspectDatabase}.
 */
export function readEvents(path: string, sessionKey: string, options?: ReadEventsOptions | null): SessionEvents {
  a.str(path, 'path')
  a.str(sessionKey, 'sessionKey')
  const o = a.opts(options, 'options', 'readEvents')
  const checked = { since: a.optNum(o?.since, 'since'), agentId: a.optStr(o?.agentId, 'agentId') }
  try {
    return native.readEvents(path, sessionKey, checked)
  } catch (e) {
    throw fromNative(e)
  }
}
