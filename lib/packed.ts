/**
 * The packed form of results, defined once: the addon (`src/packed.rs`) writes rows as one
 * string plus one `Float64Array` and single events as one string, and the functions here
 * build the objects with literals, which costs a fraction of building them through Node-API.
 * A Jest test checks the constants below against the addon's own (`packedLayout()`).
 * @packageDocumentation
 */
import type { ChangeEvent, ForeignField, ForeignStateEvent, Notice, StateEvent, StateChanges } from './types'

/** Numbers per event row. */
export const EVENT_STRIDE = 12
/** Numbers per `stateVersions` row (`versions.ts`). */
export const VERSION_STRIDE = 4
/** Numbers per notice row. */
export const NOTICE_STRIDE = 5
/** A row's length slot: the field is absent. */
export const ABSENT = -1
/** A row's length slot: the same value as the row before. */
export const SAME = -2
/** Length slots at the head of a packed single event. */
export const EVENT_SLOTS = 11
/** A packed single event's length slot: the field is absent. */
export const EVENT_SLOT_ABSENT = 0xffff
/**
 * The slots of a packed single event, in the order their fields follow: the digits of
 * `sequence` (8) and `occurredAt` (9), session key (0), agent (1), kind (2), actor type (3),
 * actor id (4), run id (5), session id (6), summary (7), payload JSON (10).
 */
export const EVENT_FIELD_ORDER: readonly number[] = [8, 9, 0, 1, 2, 3, 4, 5, 6, 7, 10]
/** The names of a row's foreign fields, by bit of its mask (`ForeignFields` in the core). */
export const FOREIGN_FIELDS: readonly ForeignField[] = [
  'sequence',
  'kind',
  'actorType',
  'actorId',
  'runId',
  'sessionId',
  'occurredAt',
  'summary',
  'payload',
]
/** The first signal word while no notice is queued in the store. */
export const SIGNAL_EMPTY = 0

/** Rows as the addon packs them. */
export interface PackedRows {
  /** The rows' strings, back to back. */
  text: string
  /** The rows' numbers and string lengths. */
  numbers: Float64Array
  /** Event rows only: the present payloads as one JSON array text, or null. */
  payloads?: string | null
}

/** `changesSince` as the addon packs it. */
export interface PackedChanges {
  /** The event rows. */
  rows: PackedRows
  /** The session's state version. */
  stateVersion: number
  /** More events exist past `limit`. */
  truncated: boolean
  /** The smallest retained sequence. */
  earliestAvailableSequence: number
  /** `after` predates retained history. */
  historyGap: boolean
}

/** One packed event: a string, or one event row when a field was too long for a slot. */
export type PackedEvent = string | PackedRows

/** The event of a packed single event. */
export function eventOf(p: PackedEvent): StateEvent {
  if (typeof p !== 'string') return events(p)[0] as StateEvent
  let at = EVENT_SLOTS
  let len = p.charCodeAt(8)
  const sequence = +p.slice(at, at + len)
  at += len
  len = p.charCodeAt(9)
  const occurredAt = +p.slice(at, at + len)
  at += len
  len = p.charCodeAt(0)
  const sessionKey = p.slice(at, at + len)
  at += len
  len = p.charCodeAt(1)
  const agentId = p.slice(at, at + len)
  at += len
  len = p.charCodeAt(2)
  const kind = p.slice(at, at + len) as StateEvent['kind']
  at += len
  len = p.charCodeAt(3)
  const actorType = p.slice(at, at + len) as StateEvent['actorType']
  at += len
  // Filled in the documented key order, absent fields left out.
  const e = { sequence, sessionKey, agentId, kind, actorType } as StateEvent
  len = p.charCodeAt(4)
  if (len !== EVENT_SLOT_ABSENT) {
    e.actorId = p.slice(at, at + len)
    at += len
  }
  len = p.charCodeAt(5)
  if (len !== EVENT_SLOT_ABSENT) {
    e.runId = p.slice(at, at + len)
    at += len
  }
  len = p.charCodeAt(6)
  if (len !== EVENT_SLOT_ABSENT) {
    e.sessionId = p.slice(at, at + len)
    at += len
  }
  e.occurredAt = occurredAt
  len = p.charCodeAt(7)
  e.summary = p.slice(at, at + len)
  at += len
  len = p.charCodeAt(10)
  if (len !== EVENT_SLOT_ABSENT) e.payload = JSON.parse(p.slice(at, at + len)) as Record<string, unknown>
  return e
}

/** The names of the fields set in a foreign row's mask. */
function foreignFields(mask: number): ForeignField[] {
  const out: ForeignField[] = []
  for (let bit = 0; bit < FOREIGN_FIELDS.length; bit++) {
    if (mask & (1 << bit)) out.push(FOREIGN_FIELDS[bit] as ForeignField)
  }
  return out
}

/** The events of event rows. */
export function events(rows: PackedRows): ChangeEvent[] {
  const { text, numbers: m } = rows
  const payloads = rows.payloads ? (JSON.parse(rows.payloads) as unknown[]) : []
  const out: ChangeEvent[] = []
  let at = 0
  let p = 0
  let len: number
  let sessionKey = ''
  let agentId = ''
  let kind = ''
  let actorType = ''
  for (let j = 0; j < m.length; j += EVENT_STRIDE) {
    len = m[j + 2] as number
    if (len !== SAME) {
      sessionKey = text.slice(at, at + len)
      at += len
    }
    len = m[j + 3] as number
    if (len !== SAME) {
      agentId = text.slice(at, at + len)
      at += len
    }
    len = m[j + 4] as number
    if (len !== SAME) {
      kind = text.slice(at, at + len)
      at += len
    }
    len = m[j + 5] as number
    if (len !== SAME) {
      actorType = text.slice(at, at + len)
      at += len
    }
    const e = {
      sequence: m[j] as number,
      sessionKey,
      agentId,
      kind,
      actorType,
    } as StateEvent
    len = m[j + 6] as number
    if (len !== ABSENT) {
      e.actorId = text.slice(at, at + len)
      at += len
    }
    len = m[j + 7] as number
    if (len !== ABSENT) {
      e.runId = text.slice(at, at + len)
      at += len
    }
    len = m[j + 8] as number
    if (len !== ABSENT) {
      e.sessionId = text.slice(at, at + len)
      at += len
    }
    e.occurredAt = m[j + 1] as number
    len = m[j + 9] as number
    e.summary = text.slice(at, at + len)
    at += len
    const payload = m[j + 10]
    if (payload === 1) e.payload = payloads[p++] as Record<string, unknown>
    const mask = m[j + 11] as number
    if (mask !== 0) {
      const f = e as unknown as ForeignStateEvent
      if (payload === 2) f.payloadText = payloads[p++] as string
      f.foreign = foreignFields(mask)
    }
    out.push(e)
  }
  return out
}

/** The `stateChanges` of packed `changesSince`. */
export function stateChanges(c: PackedChanges): StateChanges {
  return {
    events: events(c.rows),
    truncated: c.truncated,
    earliestAvailableSequence: c.earliestAvailableSequence,
    historyGap: c.historyGap,
  }
}

/** The notices of `watcherKey` in notice rows. */
export function notices(watcherKey: string, rows: PackedRows): Notice[] {
  const { text, numbers: m } = rows
  const out: Notice[] = []
  let at = 0
  let len: number
  for (let j = 0; j < m.length; j += NOTICE_STRIDE) {
    len = m[j] as number
    const targetKey = text.slice(at, at + len)
    at += len
    len = m[j + 2] as number
    const noticeText = text.slice(at, at + len)
    at += len
    len = m[j + 3] as number
    const contextKey = text.slice(at, at + len)
    at += len
    const n: Notice = { watcherKey, targetKey, changesSince: m[j + 1] as number, text: noticeText, contextKey }
    len = m[j + 4] as number
    if (len !== ABSENT) {
      n.scope = text.slice(at, at + len)
      at += len
    }
    out.push(n)
  }
  return out
}
