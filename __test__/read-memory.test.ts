// A result costs memory only while JavaScript holds it: a synchronous loop of reads (a
// migration, a batch reconcile) that never yields to the event loop keeps its resident memory
// bounded. Before, each result's numbers were an external buffer freed from the event loop:
// 20,000 reads of 100 events held about 190 MB until the loop yielded.
import { fixture, must } from './helpers'

jest.setTimeout(120_000)

const fx = fixture('read-memory')
const K = 'agent:main:subagent:k'
const MiB = 1024 * 1024

test('20,000 changesSince of 100 events in one synchronous loop grow RSS by less than 64 MiB', () => {
  // The cache off: every read goes through SQLite, as a read of a cold session does.
  for (const readCacheBytes of [0, undefined]) {
    const s = fx.open(fx.file(), readCacheBytes === undefined ? {} : { readCacheBytes })
    for (let i = 0; i < 100; i++) {
      must(s.record({ sessionKey: K, kind: 'run_completed', actorType: 'agent', summary: `run ${i}`, payload: { i } }))
    }
    // Warm up: the first reads' one-off allocations (statements, JIT) are not counted.
    for (let i = 0; i < 500; i++) s.changesSince(K, 0)
    const rss = process.memoryUsage.rss()
    let events = 0
    for (let i = 0; i < 20_000; i++) events += s.changesSince(K, 0).stateChanges.events.length
    const grown = process.memoryUsage.rss() - rss
    expect(events).toBe(2_000_000)
    expect(grown).toBeLessThan(64 * MiB)
  }
})
