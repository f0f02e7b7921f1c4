// The packed form of results (lib/packed.ts) against the addon's own layout (src/packed.rs),
// and round trips through both of its shapes: the single-event string and event rows.
import * as native from '../index.js'
import * as packed from '../lib/packed'
import * as versions from '../lib/versions'
import { RECORD_STRINGS } from '../lib/call-args'
import { errorSink, fixture, must } from './helpers'

const fx = fixture('packed')

test('the TypeScript layout constants are the addon’s', () => {
  expect(native.packedLayout()).toEqual({
    eventStride: packed.EVENT_STRIDE,
    versionStride: packed.VERSION_STRIDE,
    noticeStride: packed.NOTICE_STRIDE,
    absent: packed.ABSENT,
    same: packed.SAME,
    eventSlots: packed.EVENT_SLOTS,
    eventSlotAbsent: packed.EVENT_SLOT_ABSENT,
    eventFieldOrder: [...packed.EVENT_FIELD_ORDER],
    signalEmpty: packed.SIGNAL_EMPTY,
    refSlots: versions.REF_SLOTS,
    recordStrings: RECORD_STRINGS,
  })
})

const KEY = 'agent:main:subagent:π'

test('record returns the same object as changesSince, key order and absent fields included', () => {
  const s = fx.open(fx.file(), { strict: true })
  const full = must(s.record({
    sessionKey: KEY, agentId: 'main', sessionId: 'sess-1', kind: 'run_completed', actorType: 'agent',
    actorId: 'agent:main:main', runId: 'run-☃', summary: 'done 🎉', payload: { a: [1, 'x'], b: null },
    occurredAt: Date.now(),
  }))
  const bare = must(s.record({ sessionKey: KEY, kind: 'created', actorType: 'system', summary: '' }))
  expect(Object.keys(full)).toEqual([
    'sequence', 'sessionKey', 'agentId', 'kind', 'actorType', 'actorId', 'runId', 'sessionId',
    'occurredAt', 'summary', 'payload',
  ])
  expect(Object.keys(bare)).toEqual(['sequence', 'sessionKey', 'agentId', 'kind', 'actorType', 'occurredAt', 'summary'])
  expect(full).toMatchObject({ sequence: 1, sessionKey: KEY, runId: 'run-☃', summary: 'done 🎉', payload: { a: [1, 'x'], b: null } })
  expect(bare).toMatchObject({ sequence: 2, agentId: 'main', summary: '' })
  const events = s.changesSince(KEY, 0).stateChanges.events
  expect(events).toEqual([full, bare])
  expect(events.map((e) => Object.keys(e))).toEqual([Object.keys(full), Object.keys(bare)])
})

test('rows repeat the session, agent, kind and actor of the row before without sending them again', () => {
  const s = fx.open(fx.file(), { strict: true })
  const other = 'agent:ops:subagent:b'
  for (const k of [KEY, KEY, other]) s.record({ sessionKey: k, kind: 'compacted', actorType: 'system', summary: k })
  expect(s.stateVersions([{ sessionKey: KEY }, { sessionKey: other }, { sessionKey: 'agent:main:none' }])).toEqual([
    { sessionKey: KEY, agentId: 'main', stateVersion: 2 },
    { sessionKey: other, agentId: 'ops', stateVersion: 3 },
  ])
  expect(s.changesSince(KEY, 0).stateChanges.events.map((e) => [e.sequence, e.sessionKey, e.kind, e.summary])).toEqual([
    [1, KEY, 'compacted', KEY],
    [2, KEY, 'compacted', KEY],
  ])
})

test('the empty drain answered from the signal words matches the addon, before and after a notice', () => {
  const sink = errorSink()
  const s = fx.open(fx.file(), { onError: sink.onError })
  const W = 'agent:main:main'
  s.record({ sessionKey: KEY, kind: 'child_spawned', actorType: 'agent', summary: 's', watchers: [W] })
  expect(s.drain(W)).toEqual([])
  expect(s.drain(W)).toEqual([])
  s.record({ sessionKey: KEY, kind: 'goal_changed', actorType: 'human', summary: 'g' })
  expect(s.drain(W).map((n) => [n.watcherKey, n.targetKey, n.changesSince])).toEqual([[W, KEY, 1]])
  expect(s.drain(W)).toEqual([])
  s.close()
  expect(() => s.drain(W)).toThrow(expect.objectContaining({ code: 'ERR_CLOSED' }))
  expect(sink.codes()).toEqual([])
})
