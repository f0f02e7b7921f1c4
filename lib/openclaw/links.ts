/**
 * OpenClaw 2026.9.6's upstream-link functions over the store's link table (the same table and
 * columns as OpenClaw's `session_upstream_links`). Like OpenClaw's, they report a failure and
 * return a default, except where OpenClaw throws: `upsertSessionUpstreamLink` with `ifAbsent`
 * and `deleteSessionUpstreamLink` with `expected`.
 * @packageDocumentation
 */
import { isDeepStrictEqual } from 'node:util'
import type { NativeLinkRow } from '../../index.js'
import { fromNative } from '../errors'
import { natives } from '../session-state'
import { adapter, atTime, report } from './host'

/** An upstream link, as OpenClaw reads it. */
export interface SessionUpstreamLink {
  /** The linked session. */
  sessionKey: string
  /** Its agent. */
  agentId: string
  /** The catalog (`claude`). */
  catalogId: string
  /** Where the upstream session lives (`gateway:local`, `node:<id>`). */
  hostId: string
  /** The upstream session id. */
  threadId: string
  /** The upstream's kind (`claude-cli`). */
  upstreamKind: string
  /** The upstream reference (`{ filePath }`, `{ nodeId, threadId }`); null when unreadable. */
  upstreamRef: unknown
  /** The scan marker (`{ offset }`, `{ uuid }`); null when none or unreadable. */
  marker: unknown
  /** The last scan (epoch ms), when there was one. */
  lastScannedAt?: number
  /** First written (epoch ms). */
  createdAt: number
  /** Last written (epoch ms). */
  updatedAt: number
}

/** The input of `upsertSessionUpstreamLink`. */
export interface SessionUpstreamLinkInput {
  /** The linked session. */
  sessionKey: string
  /** Its agent. */
  agentId: string
  /** The catalog. */
  catalogId: string
  /** Where the upstream session lives. */
  hostId: string
  /** The upstream session id. */
  threadId: string
  /** The upstream's kind. */
  upstreamKind: string
  /** The upstream reference, stored as JSON. */
  upstreamRef: unknown
  /** The marker to start from, stored as JSON (kept on an update whose source is unchanged). */
  marker: unknown
}

/** The options of the link writes. */
export interface SessionUpstreamLinkWriteOptions {
  /** The call's time (epoch ms); default the system clock. */
  now?: number
  /** Leave an existing row alone (`upsertSessionUpstreamLink`); a failure then throws. */
  ifAbsent?: boolean
  /** Called before the write; a throw stops it. */
  assertCommitAllowed?: () => void
  /** Write the marker only while the row's `updatedAt` is this (`updateSessionUpstreamLinkMarker`). */
  expectedUpdatedAt?: number
  /** Delete only while the row reads as this link (`deleteSessionUpstreamLink`); a failure then throws. */
  expected?: SessionUpstreamLink
}

function native() {
  const n = natives.get(adapter().store)
  if (n === undefined) throw new Error('the store has no native object')
  return n
}

function parseJson(value: string | null | undefined): unknown {
  if (value === null || value === undefined) return null
  try {
    return JSON.parse(value) ?? null
  } catch {
    return null
  }
}

/** A stored row as OpenClaw's `rowToSessionUpstreamLink` reads it. */
function toLink(r: NativeLinkRow): SessionUpstreamLink {
  return {
    sessionKey: r.sessionKey,
    agentId: r.agentId,
    catalogId: r.catalogId,
    hostId: r.hostId,
    threadId: r.threadId,
    upstreamKind: r.upstreamKind,
    upstreamRef: parseJson(r.upstreamRefJson),
    marker: parseJson(r.lastMarkerJson),
    ...(r.lastScannedAt === null || r.lastScannedAt === undefined ? {} : { lastScannedAt: r.lastScannedAt }),
    createdAt: r.createdAt,
    updatedAt: r.updatedAt,
  }
}

/**
 * Writes a link. A row whose source (thread, host, kind or reference) changed takes the new
 * marker and forgets its last scan; otherwise its marker and last scan stay. True when a row
 * was written (with `ifAbsent`, false when one existed).
 */
export function upsertSessionUpstreamLink(input: SessionUpstreamLinkInput, options: SessionUpstreamLinkWriteOptions = {}): boolean {
  const now = options.now ?? Date.now()
  try {
    options.assertCommitAllowed?.()
    const row: NativeLinkRow = {
      sessionKey: input.sessionKey,
      agentId: input.agentId,
      catalogId: input.catalogId,
      hostId: input.hostId,
      threadId: input.threadId,
      upstreamKind: input.upstreamKind,
      upstreamRefJson: JSON.stringify(input.upstreamRef),
      lastMarkerJson: JSON.stringify(input.marker),
      lastScannedAt: undefined,
      createdAt: now,
      updatedAt: now,
    }
    return atTime(now, () => native().upsertLinkRow(row, options.ifAbsent === true))
  } catch (e) {
    if (options.ifAbsent) throw fromNative(e)
    report(fromNative(e))
    return false
  }
}

/** The link of a session and agent, or undefined (also on failure). */
export function readSessionUpstreamLink(sessionKey: string, agentId: string): SessionUpstreamLink | undefined {
  try {
    const row = native().linkRow(sessionKey, agentId)
    return row ? toLink(row) : undefined
  } catch (e) {
    report(fromNative(e))
    return undefined
  }
}

/** Records a scan: the marker, and the last scan at now. False when no row was written. */
export function updateSessionUpstreamLinkMarker(
  sessionKey: string,
  agentId: string,
  marker: unknown,
  options: SessionUpstreamLinkWriteOptions = {},
): boolean {
  const now = options.now ?? Date.now()
  try {
    const json = JSON.stringify(marker) ?? 'null'
    return atTime(now, () => native().setLinkMarker(sessionKey, agentId, json, options.expectedUpdatedAt))
  } catch (e) {
    report(fromNative(e))
    return false
  }
}

/**
 * Deletes the link of a session and agent: `deleted`; with `expected`, `absent` when there is
 * none and `changed` when it no longer reads as `expected`. Undefined on failure.
 */
export function deleteSessionUpstreamLink(
  sessionKey: string,
  agentId: string,
  options: SessionUpstreamLinkWriteOptions = {},
): 'deleted' | 'absent' | 'changed' | undefined {
  try {
    options.assertCommitAllowed?.()
    const n = native()
    if (options.expected) {
      const row = n.linkRow(sessionKey, agentId)
      if (!row) return 'absent'
      if (!isDeepStrictEqual(toLink(row), options.expected)) return 'changed'
    }
    n.deleteLinkRow(sessionKey, agentId)
    return 'deleted'
  } catch (e) {
    if (options.expected) throw fromNative(e)
    report(fromNative(e))
    return undefined
  }
}

/**
 * The links of watched sessions (some cursor targets them), grouped by catalog, each catalog's
 * by session key. A session key that several agents link is skipped (reported), as OpenClaw's
 * monitor skips it.
 */
export async function listWatchedSessionUpstreamLinks(): Promise<Map<string, SessionUpstreamLink[]>> {
  const grouped = new Map<string, SessionUpstreamLink[]>()
  try {
    const links = native().watchedLinkRows().map(toLink)
    const counts = new Map<string, number>()
    for (const l of links) counts.set(l.sessionKey, (counts.get(l.sessionKey) ?? 0) + 1)
    for (const l of links) {
      if ((counts.get(l.sessionKey) ?? 0) > 1) continue
      const list = grouped.get(l.catalogId) ?? []
      list.push(l)
      grouped.set(l.catalogId, list)
    }
  } catch (e) {
    report(fromNative(e))
  }
  return grouped
}
