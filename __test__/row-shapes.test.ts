// Each row shape is defined once, in the core (`crates/core/src/shapes.rs`, `upstream/rows.rs`),
// which lists its fields (`rowShapes()`). The TypeScript types are checked against that list
// here: each key object below is typed `Record<keyof T, true>`, so `tsc` refuses it when the
// type gains or loses a field, and the test refuses it when the core's list differs. The
// objects the addon returns are checked against the same list.
import type { CursorRow } from '../lib/types'
import type { SessionUpstreamLink } from '../lib/openclaw/links'
import { inspectDatabase } from '../lib'
import { natives } from '../lib/session-state'
import * as native from '../index.js'
import type { InspectedCursor, NativeLinkRow } from '../index.js'
import { T0, fixture } from './helpers'

const f = fixture('row-shapes')
const shapes = native.rowShapes()

const CURSOR_ROW: Record<keyof CursorRow, true> = {
  watcherKey: true,
  targetKey: true,
  lastSeen: true,
  notified: true,
  material: true,
  provenance: true,
  scope: true,
  updatedAt: true,
}
const NATIVE_LINK_ROW: Record<keyof NativeLinkRow, true> = {
  sessionKey: true,
  agentId: true,
  catalogId: true,
  hostId: true,
  threadId: true,
  upstreamKind: true,
  upstreamRefJson: true,
  lastMarkerJson: true,
  lastScannedAt: true,
  createdAt: true,
  updatedAt: true,
}
/** OpenClaw's link: the row's JSON columns parsed, under OpenClaw's names. */
const PARSED: Record<string, string> = { upstreamRefJson: 'upstreamRef', lastMarkerJson: 'marker' }
const SESSION_UPSTREAM_LINK: Record<keyof SessionUpstreamLink, true> = {
  sessionKey: true,
  agentId: true,
  catalogId: true,
  hostId: true,
  threadId: true,
  upstreamKind: true,
  upstreamRef: true,
  marker: true,
  lastScannedAt: true,
  createdAt: true,
  updatedAt: true,
}
const INSPECTED_CURSOR: Record<keyof InspectedCursor, true> = {
  watcherKey: true,
  targetKey: true,
  lastSeen: true,
  notified: true,
  material: true,
  provenance: true,
  updatedAt: true,
  targetVersion: true,
  lag: true,
  pending: true,
}

const keys = (o: object) => Object.keys(o).sort()

test('the core lists each shape once, in declaration order', () => {
  expect(shapes.cursorRow).toEqual(['watcherKey', 'targetKey', 'lastSeen', 'notified', 'material', 'provenance', 'scope', 'updatedAt'])
  expect(shapes.linkRow).toHaveLength(11)
  expect(shapes.inspectedCursor).toEqual([...shapes.cursorRow.filter((k) => k !== 'scope'), 'targetVersion', 'lag', 'pending'])
})

test('the TypeScript types have exactly the core fields', () => {
  expect(keys(CURSOR_ROW)).toEqual([...shapes.cursorRow].sort())
  expect(keys(NATIVE_LINK_ROW)).toEqual([...shapes.linkRow].sort())
  expect(keys(SESSION_UPSTREAM_LINK)).toEqual(shapes.linkRow.map((k) => PARSED[k] ?? k).sort())
  expect(keys(INSPECTED_CURSOR)).toEqual([...shapes.inspectedCursor].sort())
})

test('the objects the addon returns carry every core field', () => {
  const file = f.file()
  const s = f.open(file, { clock: () => T0 })
  s.watch('agent:main:main', 'agent:main:subagent:a', { scope: '/stores/main.sqlite' })
  s.record({ sessionKey: 'agent:main:subagent:a', kind: 'human_direct_message', actorType: 'human', summary: 's' })
  const [row] = s.cursorRows()
  expect(keys(row)).toEqual([...shapes.cursorRow].sort())

  const n = natives.get(s)!
  const link: NativeLinkRow = {
    sessionKey: 'agent:main:subagent:a',
    agentId: 'main',
    catalogId: 'claude',
    hostId: 'gateway:local',
    threadId: 't',
    upstreamKind: 'claude-cli',
    upstreamRefJson: '{"threadId":"t"}',
    lastMarkerJson: '{"uuid":null}',
    lastScannedAt: undefined,
    createdAt: T0,
    updatedAt: T0,
  }
  expect(n.upsertLinkRow(link, false)).toBe(true)
  expect(n.setLinkMarker(link.sessionKey, 'main', '{"uuid":"u"}', null)).toBe(true)
  const stored = n.linkRow(link.sessionKey, 'main')!
  expect(keys(stored)).toEqual([...shapes.linkRow].sort())
  expect(n.watchedLinkRows().map(keys)).toEqual([[...shapes.linkRow].sort()])
  s.close()

  const [inspected] = inspectDatabase(file).cursors
  expect(keys(inspected)).toEqual([...shapes.inspectedCursor].sort())
})
