// `cursorRows`: the cursor rows as stored, for hosts that answer questions about watches.
import { T0, fixture } from './helpers'

const f = fixture('cursor-rows')

const M = 'agent:main:main'
const A = 'agent:main:subagent:a'
const B = 'agent:main:subagent:b'

test('rows of a watcher, of a target, of a pair, and all, ordered by watcher then target', () => {
  let now = T0
  const s = f.open(f.file(), { clock: () => now })
  s.watch(M, B, { scope: '/stores/main.sqlite' })
  s.watch(M, A)
  now = T0 + 5
  s.watch(A, B, { provenance: 'ambient-group' })
  s.record({ sessionKey: B, kind: 'human_direct_message', actorType: 'human', summary: 's' })
  const all = s.cursorRows()
  expect(all).toEqual([
    { watcherKey: M, targetKey: A, lastSeen: 0, notified: 0, material: 0, provenance: 'explicit', updatedAt: T0 },
    {
      watcherKey: M,
      targetKey: B,
      lastSeen: 0,
      notified: 1,
      material: 1,
      provenance: 'explicit',
      updatedAt: T0 + 5,
      scope: '/stores/main.sqlite',
    },
    { watcherKey: A, targetKey: B, lastSeen: 0, notified: 1, material: 1, provenance: 'ambient-group', updatedAt: T0 + 5 },
  ])
  // An absent scope is left out of the row, never present as undefined or null.
  expect(Object.keys(all[0] as object)).not.toContain('scope')
  expect(s.cursorRows({ watcherKey: M }).map((r) => r.targetKey)).toEqual([A, B])
  expect(s.cursorRows({ targetKey: B }).map((r) => r.watcherKey)).toEqual([M, A])
  expect(s.cursorRows({ watcherKey: M, targetKey: B }).map((r) => r.notified)).toEqual([1])
  expect(s.cursorRows({ watcherKey: 'agent:main:nobody' })).toEqual([])
  expect(s.cursorRows(null)).toHaveLength(3)
})

test('an empty key or a key of the wrong type is ERR_INVALID_ARG; a closed store is ERR_CLOSED', () => {
  const s = f.open(f.file())
  expect(() => s.cursorRows({ watcherKey: '' })).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARG' }))
  expect(() => s.cursorRows({ targetKey: '' })).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARG' }))
  expect(() => s.cursorRows({ targetKey: 1 as never })).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARG' }))
  s.close()
  expect(() => s.cursorRows()).toThrow(expect.objectContaining({ code: 'ERR_CLOSED' }))
})
