import { appendFileSync, mkdtempSync, rmSync, unlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import { SessionState, StateEvent } from '../lib'

const KEY = 'agent:main:adopted'
const WATCHER = 'agent:main:main'
const line = (v: unknown) => JSON.stringify(v) + '\n'
const human = (text: string) => line({ type: 'user', message: { role: 'user', content: text } })

let dir: string
let stores: SessionState[] = []
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'sa-upstream-'))
})
afterEach(() => {
  for (const s of stores) s.close()
  stores = []
  rmSync(dir, { recursive: true, force: true })
})

function open(errors: Array<{ code: string }> = [], extra: Record<string, unknown> = {}) {
  const s = new SessionState(join(dir, 'state.sqlite'), { onError: (e) => errors.push({ code: e.code }), ...extra })
  stores.push(s)
  return s
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
async function until<T>(f: () => T | undefined, ms = 10_000): Promise<T> {
  const end = Date.now() + ms
  for (;;) {
    const v = f()
    if (v !== undefined) return v
    if (Date.now() > end) throw new Error('timed out')
    await sleep(20)
  }
}

test('adopt records a log-only event and a watched transcript reports human turns once', () => {
  const transcript = join(dir, 's.jsonl')
  writeFileSync(transcript, human('history before adoption'))
  const s = open()
  const adopted = s.adopt(KEY, { source: 'claude', transcriptPath: transcript }) as StateEvent
  expect(adopted).toEqual({
    sequence: 1,
    sessionKey: KEY,
    agentId: 'main',
    kind: 'adopted',
    actorType: 'system',
    occurredAt: adopted.occurredAt,
    summary: 'adopted from claude',
    payload: { source: 'claude' },
  })
  expect(s.peek(WATCHER)).toEqual([])
  // Not watched: not scanned.
  appendFileSync(transcript, human('typed while unwatched'))
  expect(s.scanUpstream()).toEqual([])
  expect(s.watch(WATCHER, KEY)).toBe(true)
  appendFileSync(transcript, human('typed while watched'))
  appendFileSync(transcript, line({ type: 'user', isMeta: true, message: { role: 'user', content: 'meta' } }))
  appendFileSync(transcript, line({ type: 'user', message: { role: 'user', content: [{ type: 'tool_result', content: 'x' }] } }))
  const [ev] = s.scanUpstream()
  expect(ev).toMatchObject({ sequence: 2, kind: 'human_direct_message', actorType: 'human', summary: 'human message via claude', payload: { turns: 2 } })
  expect(s.scanUpstream()).toEqual([])
  expect(s.drain(WATCHER).map((n) => n.text)).toEqual([
    'Session "agent:main:adopted" changed (other actor). Reconcile before acting: session_status sessionKey "agent:main:adopted" changesSince 1.',
  ])
})

test('own messages are not taken for a human; the eleventh-oldest is forgotten', () => {
  const transcript = join(dir, 's.jsonl')
  writeFileSync(transcript, '')
  const s = open()
  s.adopt(KEY, { source: 'claude', transcriptPath: transcript })
  s.watch(WATCHER, KEY)
  for (let i = 0; i < 11; i++) s.noteOwnUserMessage(KEY, `sent ${i}`)
  appendFileSync(transcript, human('sent 3'))
  expect(s.scanUpstream()).toEqual([])
  appendFileSync(transcript, human('sent 0'))
  expect(s.scanUpstream().map((e) => e.payload)).toEqual([{ turns: 1 }])
  // A session that is not adopted: a no-op.
  expect(s.noteOwnUserMessage('agent:main:other', 'x')).toBeUndefined()
})

test('a malformed line is reported through onError and the scan goes on', async () => {
  const transcript = join(dir, 's.jsonl')
  writeFileSync(transcript, '')
  const errors: Array<{ code: string }> = []
  const s = open(errors)
  s.adopt(KEY, { source: 'claude', transcriptPath: transcript })
  s.watch(WATCHER, KEY)
  appendFileSync(transcript, '{"type": "user", oops\n' + human('after the bad line'))
  expect(s.scanUpstream().map((e) => e.payload)).toEqual([{ turns: 1 }])
  // Scan failures are reported like other background work: on the JS thread, just after.
  await until(() => (errors.length ? errors : undefined))
  expect(errors).toEqual([{ code: 'ERR_UPSTREAM_PARSE' }])
})

test('a deleted transcript gives upstream_missing after exactly three checks, then none', () => {
  const transcript = join(dir, 's.jsonl')
  writeFileSync(transcript, '')
  const s = open()
  s.adopt(KEY, { source: 'claude', transcriptPath: transcript })
  s.watch(WATCHER, KEY)
  unlinkSync(transcript)
  expect(s.scanUpstream()).toEqual([])
  expect(s.scanUpstream()).toEqual([])
  const [missing] = s.scanUpstream()
  expect(missing).toMatchObject({ kind: 'upstream_missing', actorType: 'system', sequence: 2 })
  expect(s.scanUpstream()).toEqual([])
  expect(s.peek(WATCHER).map((n) => n.changesSince)).toEqual([1])
})

test('checkUpstream: baseline, new human items, found false three times, unknown ignored', () => {
  const s = open()
  s.adopt(KEY, { source: 'claude', remoteId: 'node-1:abc' })
  const item = (uuid: string, text: string) => ({ uuid, type: 'user', message: { role: 'user', content: text } })
  expect(s.checkUpstream(KEY, { found: true, items: [item('a', 'old')] })).toBeNull()
  const ev = s.checkUpstream(KEY, { found: true, items: [item('a', 'old'), item('b', 'new')] })
  expect(ev).toMatchObject({ kind: 'human_direct_message', payload: { turns: 1 } })
  expect(s.checkUpstream(KEY, { found: 'unknown' })).toBeNull()
  expect(s.checkUpstream(KEY, { found: false })).toBeNull()
  expect(s.checkUpstream(KEY, { found: false })).toBeNull()
  expect(s.checkUpstream(KEY, { found: false })).toMatchObject({ kind: 'upstream_missing' })
  expect(s.checkUpstream(KEY, { found: false })).toBeNull()
})

test('bad input: best-effort null plus one onError, or a coded throw with strict', () => {
  const errors: Array<{ code: string }> = []
  const s = open(errors)
  expect(s.adopt(KEY, { source: '' })).toBeNull()
  expect(s.checkUpstream(KEY, { found: 'maybe' } as never)).toBeNull()
  expect(s.checkUpstream(KEY, { found: true } as never)).toBeNull()
  expect(errors).toEqual([{ code: 'ERR_INVALID_ARG' }, { code: 'ERR_INVALID_ARG' }, { code: 'ERR_INVALID_ARG' }])
  const strict = open([], { strict: true })
  expect(() => strict.adopt(KEY, { source: '' })).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARG' }))
  expect(() => s.startUpstreamMonitor({ intervalMs: 0 })).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARG' }))
})

test('the background monitor scans on its interval and stops', async () => {
  const transcript = join(dir, 's.jsonl')
  writeFileSync(transcript, '')
  const s = open()
  s.adopt(KEY, { source: 'claude', transcriptPath: transcript })
  s.watch(WATCHER, KEY)
  s.startUpstreamMonitor({ intervalMs: 20 })
  appendFileSync(transcript, human('hello'))
  const notices = await until(() => {
    const p = s.peek(WATCHER)
    return p.length ? p : undefined
  })
  expect(notices.map((n) => n.changesSince)).toEqual([1])
  s.stopUpstreamMonitor()
  s.drain(WATCHER)
  appendFileSync(transcript, human('after stop'))
  await sleep(200)
  expect(s.stateVersion(KEY)).toBe(2)
})
