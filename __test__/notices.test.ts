// Notices (semantics.md#cursors): one coalesced notice per (watcher, target), byte-stable text, drain/peek order,
// the reopen on acknowledge, and what resetSession / deleteSession take with them.
import {
  codeOf,
  cursorRow,
  encodeNoticeContextKey,
  fixture,
  human,
  must,
  noticeText,
  settle,
  spawn,
  waitFor,
  wakeSink,
} from './helpers'

const fx = fixture('notices')
const PARENT = 'agent:main:main'
const CHILD = 'agent:main:subagent:c'
const OTHER = 'agent:main:subagent:d'

describe('one notice per change burst', () => {
  test('twenty rapid material events give one notice, byte-stable, at the seed, and one wake', async () => {
    const file = fx.file()
    const wakes = wakeSink()
    const s = fx.open(file, { wake: wakes.wake, wakeCoalesceMs: 0 })
    must(s.record(spawn(CHILD, PARENT))) // 1
    const texts = new Set<string>()
    for (let i = 0; i < 20; i++) {
      must(s.record(human(CHILD))) // 2..21
      const p = s.peek(PARENT)
      expect(p).toHaveLength(1)
      texts.add(p[0].text)
    }
    expect([...texts]).toEqual([noticeText(CHILD, 1)])
    expect(s.peek(PARENT)).toStrictEqual([
      {
        watcherKey: PARENT,
        targetKey: CHILD,
        changesSince: 1,
        text: `Session "${CHILD}" changed (other actor). Reconcile before acting: session_status sessionKey "${CHILD}" changesSince 1.`,
        contextKey: encodeNoticeContextKey(CHILD),
      },
    ])
    expect(cursorRow(file, PARENT, CHILD)).toEqual({ l: 1, n: 2, m: 21, provenance: 'explicit' })
    await waitFor(() => wakes.wakes.length === 1, 'the wake')
    await settle()
    expect(wakes.calls()).toEqual([[PARENT, `session-state:${CHILD}`]])
  })

  test('seed, three material events: drain at the seed, then one reopened notice at the first event, then nothing', () => {
    const file = fx.file()
    const s = fx.open(file)
    must(s.record({ sessionKey: CHILD, kind: 'created', actorType: 'system', summary: 'c' })) // 1
    expect(s.watch(PARENT, CHILD)).toBe(true) // seed 1
    const first = must(s.record(human(CHILD))).sequence // 2
    must(s.record(human(CHILD))) // 3
    must(s.record(human(CHILD))) // 4
    expect(first).toBe(2)

    const d1 = s.drain(PARENT)
    expect(d1.map((n) => [n.targetKey, n.changesSince, n.text])).toEqual([[CHILD, 1, noticeText(CHILD, 1)]])
    expect(s.changesSince(CHILD, d1[0].changesSince).stateChanges.events.map((e) => e.sequence)).toEqual([2, 3, 4])
    expect(cursorRow(file, PARENT, CHILD)).toEqual({ l: 2, n: 4, m: 4, provenance: 'explicit' })

    expect(s.peek(PARENT).map((n) => n.changesSince)).toEqual([first])
    const d2 = s.drain(PARENT)
    expect(d2).toStrictEqual([
      {
        watcherKey: PARENT,
        targetKey: CHILD,
        changesSince: first,
        text: noticeText(CHILD, first),
        contextKey: encodeNoticeContextKey(CHILD),
      },
    ])
    expect(cursorRow(file, PARENT, CHILD)).toEqual({ l: 4, n: 4, m: 4, provenance: 'explicit' })
    expect(s.drain(PARENT)).toEqual([])
    expect(s.peek(PARENT)).toEqual([])
  })

  test('drained with nothing new since: no reopen; log-only events never reopen', () => {
    const file = fx.file()
    const s = fx.open(file)
    s.watch(PARENT, CHILD)
    must(s.record(human(CHILD))) // 1
    for (const kind of ['run_completed', 'run_failed', 'compacted', 'adopted', 'created', 'child_spawned'] as const) {
      must(s.record({ sessionKey: CHILD, kind, actorType: 'agent', summary: kind }))
    }
    expect(s.drain(PARENT).map((n) => n.changesSince)).toEqual([0])
    expect(s.drain(PARENT)).toEqual([])
    expect(cursorRow(file, PARENT, CHILD)).toEqual({ l: 1, n: 1, m: 1, provenance: 'explicit' })
  })

  test('a new material event after a full drain opens a notice at the last acknowledged position', () => {
    const s = fx.open(fx.file())
    s.watch(PARENT, CHILD)
    must(s.record(human(CHILD))) // 1
    expect(s.drain(PARENT).map((n) => n.changesSince)).toEqual([0])
    must(s.record(human(CHILD))) // 2
    expect(s.drain(PARENT).map((n) => n.changesSince)).toEqual([1])
  })
})

describe('drain and peek', () => {
  test('a watcher’s notices come in the order they entered the queue; peek acknowledges nothing', () => {
    const s = fx.open(fx.file())
    const T3 = 'agent:main:subagent:e'
    for (const t of [CHILD, OTHER, T3]) s.watch(PARENT, t)
    s.watch(OTHER, CHILD)
    must(s.record(human(OTHER))) // 1
    must(s.record(human(T3))) // 2
    must(s.record(human(CHILD))) // 3
    must(s.record(human(OTHER))) // 4: absorbed
    const order = [
      [OTHER, 0],
      [T3, 0],
      [CHILD, 0],
    ]
    expect(s.peek(PARENT).map((n) => [n.targetKey, n.changesSince])).toEqual(order)
    expect(s.peek(PARENT).map((n) => [n.targetKey, n.changesSince])).toEqual(order)
    expect(s.peek(OTHER).map((n) => [n.watcherKey, n.targetKey])).toEqual([[OTHER, CHILD]])
    expect(s.drain(PARENT).map((n) => [n.targetKey, n.changesSince])).toEqual(order)
    // OTHER had a second event: it alone reopens, at old N = 1.
    expect(s.drain(PARENT).map((n) => [n.targetKey, n.changesSince])).toEqual([[OTHER, 1]])
    expect(s.drain(PARENT)).toEqual([])
    // Another watcher's notice is untouched by PARENT's drains.
    expect(s.drain(OTHER).map((n) => n.changesSince)).toEqual([0])
  })

  test('a reopened notice goes after those still queued', () => {
    const s = fx.open(fx.file())
    s.watch(PARENT, CHILD)
    s.watch(PARENT, OTHER)
    must(s.record(human(CHILD))) // 1
    must(s.record(human(CHILD))) // 2
    must(s.record(human(OTHER))) // 3
    expect(s.acknowledge(PARENT, [CHILD])).toBe(1)
    expect(s.peek(PARENT).map((n) => [n.targetKey, n.changesSince])).toEqual([
      [OTHER, 0],
      [CHILD, 1],
    ])
  })

  test('drain, peek and acknowledge of unknown or bare watchers are empty; an empty key is refused', () => {
    const s = fx.open(fx.file())
    expect(s.drain('agent:main:nobody')).toEqual([])
    expect(s.peek('global')).toEqual([])
    expect(codeOf(() => s.drain(''))).toBe('ERR_INVALID_ARG')
    expect(codeOf(() => s.peek(''))).toBe('ERR_INVALID_ARG')
    expect(codeOf(() => s.acknowledge('agent:main:nobody', ['']))).toBe('ERR_INVALID_ARG')
  })
})

describe('the notice text', () => {
  test('a key with a quote and a newline is a JSON string literal; the text stays one line', () => {
    const s = fx.open(fx.file())
    const odd = 'agent:main:we"ird\nkey\u2028x\\'
    expect(s.watch(PARENT, odd)).toBe(true)
    must(s.record(human(odd))) // 1
    const [n] = s.peek(PARENT)
    // U+2028 is escaped too: JSON allows it raw, but many readers end a line there.
    expect(n.text).toBe(
      'Session "agent:main:we\\"ird\\nkey\\u2028x\\\\" changed (other actor). Reconcile before acting: ' +
        'session_status sessionKey "agent:main:we\\"ird\\nkey\\u2028x\\\\" changesSince 0.',
    )
    expect(n.text).toBe(noticeText(odd, 0))
    expect(n.text.split(/[\n\u2028]/)).toHaveLength(1)
    expect(n.text.includes('\r')).toBe(false)
    expect(n.targetKey).toBe(odd)
    expect(n.contextKey).toBe(encodeNoticeContextKey(odd))
  })

  test('a non-ASCII key is kept as is', () => {
    const s = fx.open(fx.file())
    const key = 'agent:main:café😀'
    s.watch(PARENT, key)
    must(s.record(human(key)))
    expect(s.peek(PARENT)[0].text).toBe(
      `Session "agent:main:café😀" changed (other actor). Reconcile before acting: session_status sessionKey "agent:main:café😀" changesSince 0.`,
    )
  })
})

describe('resetSession and deleteSession', () => {
  test('resetSession drops the watcher’s cursors and notices; its own history and its watchers stay', () => {
    const file = fx.file()
    const s = fx.open(file)
    s.watch(PARENT, CHILD)
    s.watch(PARENT, OTHER)
    s.watch(OTHER, PARENT)
    must(s.record(human(CHILD))) // 1
    must(s.record(human(PARENT))) // 2
    s.resetSession(PARENT)
    expect(s.peek(PARENT)).toEqual([])
    expect(cursorRow(file, PARENT, CHILD)).toBeUndefined()
    expect(cursorRow(file, PARENT, OTHER)).toBeUndefined()
    expect(s.stateVersion(PARENT)).toBe(2)
    expect(s.peek(OTHER).map((n) => n.targetKey)).toEqual([PARENT])
    must(s.record(human(CHILD))) // 3
    expect(s.peek(PARENT)).toEqual([])
    expect(codeOf(() => s.resetSession(''))).toBe('ERR_INVALID_ARG')
  })

  test('deleteSession for the key’s own agent: events, head, and every cursor as watcher or target', () => {
    const file = fx.file()
    const s = fx.open(file)
    s.watch(PARENT, CHILD)
    s.watch(CHILD, OTHER)
    s.watch(OTHER, PARENT)
    must(s.record(human(CHILD))) // 1
    must(s.record(human(OTHER))) // 2
    must(s.record(human(PARENT))) // 3
    s.deleteSession(CHILD)
    expect(s.stateVersion(CHILD)).toBe(0)
    expect(s.changesSince(CHILD, 0).stateChanges).toStrictEqual({
      events: [],
      truncated: false,
      earliestAvailableSequence: 0,
      historyGap: false,
    })
    expect(cursorRow(file, PARENT, CHILD)).toBeUndefined()
    expect(cursorRow(file, CHILD, OTHER)).toBeUndefined()
    expect(s.peek(PARENT)).toEqual([])
    expect(s.peek(CHILD)).toEqual([])
    expect(s.peek(OTHER).map((n) => n.targetKey)).toEqual([PARENT])
    expect(s.stateVersion(OTHER)).toBe(2)
  })

  test('deleteSession for another agent leaves the key’s own session and its cursors', () => {
    const file = fx.file()
    const s = fx.open(file)
    must(s.record({ sessionKey: 'global', kind: 'created', actorType: 'system', summary: 'm' })) // 1, main
    must(s.record({ sessionKey: 'global', agentId: 'ops', kind: 'created', actorType: 'system', summary: 'o' })) // 2
    s.deleteSession('global', { agentId: 'ops' })
    expect(s.stateVersion('global', { agentId: 'ops' })).toBe(0)
    expect(s.stateVersion('global')).toBe(1)

    // A qualified key can only name its own agent.
    s.watch(PARENT, CHILD)
    must(s.record(human(CHILD))) // 3
    expect(codeOf(() => s.deleteSession(CHILD, { agentId: 'ops' }))).toBe('ERR_INVALID_ARG')
    expect(s.peek(PARENT)).toHaveLength(1)
    s.deleteSession('global', { agentId: 'main' })
    expect(s.stateVersion('global')).toBe(0)
    expect(s.peek(PARENT)).toHaveLength(1)
    expect(cursorRow(file, PARENT, CHILD)).toEqual({ l: 0, n: 3, m: 3, provenance: 'explicit' })
  })

  test('a bare session deleted for another agent keeps cursors; for its own (main) drops them', () => {
    // Bare keys never hold cursors, so this checks the "own agent" rule through the head alone.
    const s = fx.open(fx.file())
    must(s.record({ sessionKey: 'main', kind: 'created', actorType: 'system', summary: 'm' }))
    must(s.record({ sessionKey: 'main', agentId: 'ops', kind: 'created', actorType: 'system', summary: 'o' }))
    s.deleteSession('main')
    expect(s.stateVersions([{ sessionKey: 'main' }, { sessionKey: 'main', agentId: 'ops' }])).toStrictEqual([
      { sessionKey: 'main', agentId: 'ops', stateVersion: 2 },
    ])
  })
})

// drain with nothing queued is answered on the JS side once the addon has seen the watcher;
// everything else must still reach the addon.
describe('the empty drain', () => {
  test('a notice queued after empty drains is drained, and the next empty drain is [] again', () => {
    const s = fx.open(fx.file())
    s.watch(PARENT, CHILD)
    for (let i = 0; i < 3; i++) expect(s.drain(PARENT)).toEqual([])
    must(s.record(human(CHILD)))
    expect(s.drain(PARENT)).toEqual([
      {
        watcherKey: PARENT,
        targetKey: CHILD,
        changesSince: 0,
        text: noticeText(CHILD, 0),
        contextKey: encodeNoticeContextKey(CHILD),
      },
    ])
    expect(s.drain(PARENT)).toEqual([])
    // Another watcher's notice does not hide this one's.
    s.watch(OTHER, CHILD)
    must(s.record(human(CHILD)))
    expect(s.drain(OTHER).map((n) => n.targetKey)).toEqual([CHILD])
    expect(s.drain(PARENT).map((n) => n.targetKey)).toEqual([CHILD])
    expect(s.drain(PARENT)).toEqual([])
  })

  test('bad keys are refused and a closed store throws, however many empty drains came before', () => {
    const s = fx.open(fx.file())
    for (let i = 0; i < 3; i++) expect(s.drain(PARENT)).toEqual([])
    expect(codeOf(() => s.drain(''))).toBe('ERR_INVALID_ARG')
    expect(codeOf(() => s.drain(5 as never))).toBe('ERR_INVALID_ARG')
    expect(codeOf(() => s.drain('x'.repeat(1025)))).toBe('ERR_INVALID_ARG')
    expect(codeOf(() => s.drain(undefined as never))).toBe('ERR_INVALID_ARG')
    s.close()
    expect(codeOf(() => s.drain(PARENT))).toBe('ERR_CLOSED')
  })

  test('a watcher whose session was deleted is served again by its next drain (semantics.md#processes)', async () => {
    const file = fx.file()
    const wakes = wakeSink()
    const a = fx.open(file, { syncIntervalMs: 10, wakeCoalesceMs: 0, wake: wakes.wake })
    expect(a.drain(PARENT)).toEqual([]) // a serves PARENT
    a.deleteSession(PARENT) // ...and stops serving it
    expect(a.drain(PARENT)).toEqual([]) // must reach the addon, which serves it again
    const b = fx.open(file, { syncIntervalMs: 0 })
    b.watch(PARENT, CHILD)
    must(b.record(human(CHILD)))
    // Only a process that serves PARENT queues the notice opened elsewhere and wakes it.
    await waitFor(() => wakes.wakes.length === 1, 'the wake for the notice recorded by the other store')
    expect(a.drain(PARENT).map((n) => [n.targetKey, n.changesSince])).toEqual([[CHILD, 0]])
  })
})
