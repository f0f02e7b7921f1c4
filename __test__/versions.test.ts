// stateVersions across the boundary (lib/versions.ts ↔ src/versions.rs): the refs string, the
// rows that name a ref by its index, and the keys and counts that could break either.
import * as versions from '../lib/versions'
import { codeOf, fixture, must, type SessionState } from './helpers'

const fx = fixture('versions')

function log(s: SessionState, sessionKey: string, agentId?: string): number {
  return must(s.record({ sessionKey, agentId, kind: 'run_completed', actorType: 'system', summary: 'r' })).sequence
}

test('packRefs writes each key’s length in two units, the agent’s length + 1 (0 when absent), then the strings', () => {
  const keys: string[] = []
  const long = 'k'.repeat(70_000)
  const text = versions.packRefs([{ sessionKey: 'ab' }, { sessionKey: 'g', agentId: 'ops' }, { sessionKey: long, agentId: null }], keys)
  expect(keys).toEqual(['ab', 'g', long])
  expect(text).toBe('\u0000\u0002\u0000\u0000ab' + '\u0000\u0001\u0000\u0004gops' + '\u0001\u1170\u0000\u0000' + long)
  expect(versions.packRefs([], [])).toBe('')
})

test('keys holding any character, the header’s own units included, come back as given', () => {
  const s = fx.open(fx.file())
  const odd = [
    'agent:main:\u0000\u0001\u0000\u0000',
    'agent:main:\uffff\uffff',
    'agent:main:π ☃ 🎉',
    'global\n"x"',
    'k'.repeat(1024),
  ]
  const want = odd.map((k) => ({ sessionKey: k, agentId: 'main', stateVersion: log(s, k) }))
  expect(s.stateVersions(odd.map((sessionKey) => ({ sessionKey })))).toStrictEqual(want)
  // Interleaved with keys that have no head, in reverse order.
  const refs = [...odd].reverse().flatMap((sessionKey) => [{ sessionKey }, { sessionKey: `${sessionKey.slice(0, 100)}-none` }])
  expect(s.stateVersions(refs)).toStrictEqual([...want].reverse())
})

test('a key with a lone surrogate reads as the key with U+FFFD, as record stores it', () => {
  const s = fx.open(fx.file())
  const stored = must(s.record({ sessionKey: 'agent:main:\ud800x', kind: 'created', actorType: 'system', summary: '' }))
  expect(stored.sessionKey).toBe('agent:main:\ufffdx')
  expect(s.stateVersions([{ sessionKey: 'agent:main:\ud800x' }, { sessionKey: 'agent:main:\ufffdx' }, { sessionKey: 'agent:main:\udc00x' }])).toStrictEqual([
    { sessionKey: 'agent:main:\ufffdx', agentId: 'main', stateVersion: 1 },
    { sessionKey: 'agent:main:\ufffdx', agentId: 'main', stateVersion: 1 },
    { sessionKey: 'agent:main:\ufffdx', agentId: 'main', stateVersion: 1 },
  ])
})

test('duplicates appear once per ref; agents resolve per ref; the agent is sent again only when it changes', () => {
  const s = fx.open(fx.file())
  const a = log(s, 'agent:ops:x') // 1
  const g = log(s, 'global', 'ops') // 2
  const m = log(s, 'global') // 3
  expect(
    s.stateVersions([
      { sessionKey: 'agent:ops:x' },
      { sessionKey: 'global', agentId: 'ops' },
      { sessionKey: 'global' },
      { sessionKey: 'global', agentId: 'main' },
      { sessionKey: 'agent:ops:x', agentId: 'ops' },
      { sessionKey: 'agent:ops:x' },
      { sessionKey: 'global', agentId: 'other' },
    ]),
  ).toStrictEqual([
    { sessionKey: 'agent:ops:x', agentId: 'ops', stateVersion: a },
    { sessionKey: 'global', agentId: 'ops', stateVersion: g },
    { sessionKey: 'global', agentId: 'main', stateVersion: m },
    { sessionKey: 'global', agentId: 'main', stateVersion: m },
    { sessionKey: 'agent:ops:x', agentId: 'ops', stateVersion: a },
    { sessionKey: 'agent:ops:x', agentId: 'ops', stateVersion: a },
  ])
})

test('0 refs and 10,000 refs', () => {
  const s = fx.open(fx.file())
  expect(s.stateVersions([])).toStrictEqual([])
  const refs = Array.from({ length: 10_000 }, (_, i) => ({ sessionKey: `agent:main:subagent:n${i}` }))
  const want = []
  for (let i = 0; i < refs.length; i += 10) {
    const sessionKey = refs[i]!.sessionKey
    want.push({ sessionKey, agentId: 'main', stateVersion: log(s, sessionKey) })
  }
  const got = s.stateVersions(refs)
  expect(got).toHaveLength(1000)
  expect(got).toStrictEqual(want)
  expect(got[999]).toStrictEqual({ sessionKey: 'agent:main:subagent:n9990', agentId: 'main', stateVersion: 1000 })
})

test('bad refs are ERR_INVALID_ARG, the first bad one wins, and nothing is read', () => {
  const s = fx.open(fx.file())
  log(s, 'agent:main:a')
  const bad: unknown[] = [
    'not an array',
    [null],
    [['agent:main:a']],
    [{}],
    [{ sessionKey: 5 }],
    [{ sessionKey: 'agent:main:a', agentId: 5 }],
    [{ sessionKey: 'agent:main:a' }, { sessionKey: '' }],
    [{ sessionKey: 'agent:main:a' }, { sessionKey: 'k'.repeat(1025) }],
    [{ sessionKey: 'agent:main:a' }, { sessionKey: 'k'.repeat(70_000) }],
    [{ sessionKey: 'agent:main:a' }, { sessionKey: 'global', agentId: 'OPS' }],
    [{ sessionKey: 'agent:main:a', agentId: 'ops' }],
  ]
  for (const refs of bad) {
    expect([JSON.stringify(refs).slice(0, 80), codeOf(() => s.stateVersions(refs as never))]).toEqual([
      JSON.stringify(refs).slice(0, 80),
      'ERR_INVALID_ARG',
    ])
  }
  expect(s.stateVersions([{ sessionKey: 'agent:main:a' }])).toStrictEqual([{ sessionKey: 'agent:main:a', agentId: 'main', stateVersion: 1 }])
})

test('a second store on the file sees every version the first one writes, read after read', () => {
  const file = fx.file()
  const s = fx.open(file)
  const other = fx.open(file)
  const refs = [{ sessionKey: 'agent:main:a' }, { sessionKey: 'agent:main:b' }]
  expect(other.stateVersions(refs)).toStrictEqual([])
  log(s, 'agent:main:a') // 1
  expect(other.stateVersions(refs)).toStrictEqual([{ sessionKey: 'agent:main:a', agentId: 'main', stateVersion: 1 }])
  log(s, 'agent:main:b') // 2
  log(other, 'agent:main:a') // 3
  const both = [
    { sessionKey: 'agent:main:a', agentId: 'main', stateVersion: 3 },
    { sessionKey: 'agent:main:b', agentId: 'main', stateVersion: 2 },
  ]
  expect(other.stateVersions(refs)).toStrictEqual(both)
  expect(s.stateVersions(refs)).toStrictEqual(both)
  s.deleteSession('agent:main:a')
  expect(other.stateVersions(refs)).toStrictEqual([both[1]])
})
