// What a new gateway engineer meets first: errors that say which call or background task
// failed (`during`), rejections that keep the caller's frames, an oversize payload refused
// after reading a bounded part of it, and documents that list every code and instrument the
// package has, with a README that stays the front door (under 10 KB).
import * as fs from 'node:fs'
import * as path from 'node:path'

import { MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics'

import { SessionState, SessionStateError } from '../lib'
import { ERROR_CODES } from '../lib/errors'
import { MAX_PAYLOAD_BYTES } from '../lib/payload'
import { errorSink, fixture, human, must, rejection, spawn, type CodedError } from './helpers'

const fx = fixture('first-use')
const ROOT = path.join(__dirname, '..')
const MAIN = 'agent:main:main'
const CHILD = 'agent:main:subagent:c'

/** The error `fn` throws. */
function thrown(fn: () => unknown): CodedError {
  try {
    fn()
  } catch (e) {
    return e as CodedError
  }
  throw new Error('expected a throw')
}

describe('during: which call or background task failed', () => {
  test('a synchronous call, its argument errors included, the constructor and SessionState.open', async () => {
    const s = fx.open(fx.file())
    expect(thrown(() => s.changesSince(CHILD, -1))).toMatchObject({ code: 'ERR_INVALID_ARG', during: 'changesSince' })
    expect(thrown(() => s.watch('', CHILD))).toMatchObject({ code: 'ERR_INVALID_ARG', during: 'watch' })
    expect(thrown(() => s.drain(''))).toMatchObject({ code: 'ERR_INVALID_ARG', during: 'drain' })
    expect(thrown(() => s.peek(''))).toMatchObject({ code: 'ERR_INVALID_ARG', during: 'peek' })
    expect(thrown(() => s.resetSession(''))).toMatchObject({ code: 'ERR_INVALID_ARG', during: 'resetSession' })
    expect(thrown(() => s.sweep({ watcherExists: 'no' as never }))).toMatchObject({ code: 'ERR_INVALID_ARG', during: 'sweep' })
    expect(thrown(() => fx.open(fx.file(), { wakeCoalescMs: 1 } as never))).toMatchObject({
      code: 'ERR_INVALID_ARG',
      during: 'new SessionState',
    })
    expect(await rejection(SessionState.open('/proc/nope/x.sqlite'))).toMatchObject({ code: 'ERR_DB', during: 'SessionState.open' })
    expect(await rejection(SessionState.open(fx.file(), { wakeCoalescMs: 1 } as never))).toMatchObject({
      code: 'ERR_INVALID_ARG',
      during: 'SessionState.open',
    })
    s.close()
    expect(thrown(() => s.stateVersion(CHILD))).toMatchObject({ code: 'ERR_CLOSED', during: 'stateVersion' })
  })

  test('a best-effort report names the call; a rejection names the Promise twin', async () => {
    const sink = errorSink()
    const s = fx.open(fx.file(), { onError: sink.onError })
    expect(s.record({ ...human(CHILD), summary: 7 as never })).toBeNull()
    expect(await s.recordAsync({ ...human(CHILD), kind: 'nope' as never })).toBeNull()
    expect(s.adopt(CHILD, { source: 7 } as never)).toBeNull()
    expect(sink.errors.map((e) => [e.code, e.during])).toEqual([
      ['ERR_INVALID_ARG', 'record'],
      ['ERR_INVALID_ARG', 'recordAsync'],
      ['ERR_INVALID_ARG', 'adopt'],
    ])
    expect(await rejection(s.changesSinceAsync(CHILD, -1))).toMatchObject({ code: 'ERR_INVALID_ARG', during: 'changesSinceAsync' })
    expect(await rejection(s.watchAsync(MAIN, ''))).toMatchObject({ code: 'ERR_INVALID_ARG', during: 'watchAsync' })
    expect(new SessionStateError('ERR_DB', 'made by hand').during).toBeUndefined()
  })
})

describe("rejections keep the caller's frames", () => {
  // The writer refuses these (a plain descriptor on the file: ERR_FILE_SHARED), so the error is
  // made in the writer's batch callback, where no frame of the caller is on the stack.
  async function gatewayTurnWatch(s: ReturnType<typeof fx.open>): Promise<void> {
    await s.watchAsync(MAIN, CHILD)
  }
  async function gatewayTurnDrain(s: ReturnType<typeof fx.open>): Promise<void> {
    await s.drainAsync(MAIN)
  }
  async function gatewayTurnRecord(s: ReturnType<typeof fx.open>): Promise<void> {
    await s.recordAsync(human(CHILD))
  }

  test('watchAsync, drainAsync, and recordAsync with strict, refused by the writer', async () => {
    const file = fx.file()
    const s = fx.open(file, { strict: true, onError: () => {} })
    must(s.record(spawn(CHILD, MAIN)))
    must(s.record(human(CHILD)))
    const fd = fs.openSync(file, 'r')
    try {
      for (const [name, turn] of [
        ['gatewayTurnWatch', gatewayTurnWatch],
        ['gatewayTurnDrain', gatewayTurnDrain],
        ['gatewayTurnRecord', gatewayTurnRecord],
      ] as const) {
        const e = await rejection(turn(s))
        expect([name, e.code]).toEqual([name, 'ERR_FILE_SHARED'])
        expect(e).toBeInstanceOf(SessionStateError)
        // `async` where the functions run as written; ts-jest's output may call them without it.
        expect(e.stack).toMatch(new RegExp(`\\n\\s+at (async )?${name} `))
        expect(e.stack).toContain(e.message)
      }
    } finally {
      fs.closeSync(fd)
    }
  })
})

describe('an oversize payload is refused after reading a bounded part of it', () => {
  /** An array of `n` strings of `size` characters whose reads are counted. */
  function counted(n: number, size: number): { payload: object; reads: () => number } {
    let reads = 0
    const item = 'x'.repeat(size)
    const items = new Proxy(Array.from({ length: n }, () => item), {
      get(target, key, receiver) {
        if (typeof key === 'string' && /^\d+$/.test(key)) reads += 1
        return Reflect.get(target, key, receiver) as unknown
      },
    })
    return { payload: { items }, reads: () => reads }
  }

  test('an array of 4,000 strings of 2,500 characters: refused at the second', () => {
    const sink = errorSink()
    const s = fx.open(fx.file(), { onError: sink.onError })
    const big = counted(4000, 2500)
    expect(s.record({ ...human(CHILD), payload: big.payload })).toBeNull()
    expect(big.reads()).toBe(2)
    expect(sink.codes()).toEqual(['ERR_INVALID_ARG'])
    // Every member of an object likewise: the getters past the limit are never called.
    // Each member `,"k000":"y…"` is 110 characters (the first 109, after the `{`): the 38th
    // finds the text at 4,070 and would take it to 4,180.
    let got = 0
    const members: Record<string, string> = {}
    for (let i = 0; i < 1000; i++) {
      Object.defineProperty(members, `k${String(i).padStart(3, '0')}`, {
        enumerable: true,
        get: () => {
          got += 1
          return 'y'.repeat(100)
        },
      })
    }
    expect(s.record({ ...human(CHILD), payload: members })).toBeNull()
    expect(got).toBe(38)
    // A 10 MB string is refused before it is copied, and one at the limit is stored.
    expect(s.record({ ...human(CHILD), payload: { blob: 'z'.repeat(10_000_000) } })).toBeNull()
    const exact = 'w'.repeat(MAX_PAYLOAD_BYTES - '{"blob":""}'.length)
    expect(s.record({ ...human(CHILD), payload: { blob: exact } })?.payload).toEqual({ blob: exact })
    expect(s.record({ ...human(CHILD), payload: { blob: `${exact}w` } })).toBeNull()
    expect(sink.codes()).toEqual(Array(4).fill('ERR_INVALID_ARG'))
  })

  test('checkUpstream rows are not payloads: a long transcript row is taken whole', () => {
    // strict: a refusal would throw.
    const s = fx.open(fx.file(), { strict: true })
    must(s.adopt(CHILD, { source: 'claude', remoteId: 'r-1' }))
    const row = { type: 'user', message: { role: 'user', content: 'v'.repeat(20_000) } }
    // The first check sets the baseline: nothing recorded.
    expect(s.checkUpstream(CHILD, { found: true, items: [row] })).toBeNull()
  })
})

describe('documents', () => {
  const read = (f: string) => fs.readFileSync(path.join(ROOT, f), 'utf8')

  test('the README stays under 10 KB and opens with the two set-up commands', () => {
    const readme = read('README.md')
    expect(Buffer.byteLength(readme)).toBeLessThan(10 * 1024)
    const first = /```sh\n([\s\S]*?)```/.exec(readme)?.[1] ?? ''
    expect(first.split('\n').filter(Boolean).map((l) => l.split('#')[0].trim())).toEqual([
      'npm ci && npm run demo',
      'npm test',
    ])
  })

  test('every error code is listed where the documents list codes', () => {
    const semantics = read('docs/semantics.md')
    const table = semantics.slice(semantics.indexOf('<a id="errors"></a>'), semantics.indexOf('<a id="glossary"></a>'))
    const guide = read('docs/gateway-guide.md')
    const guideList = guide.slice(guide.indexOf('is one of the `ErrorCode` union'), guide.indexOf('Branch on'))
    for (const code of ERROR_CODES) {
      expect([code, table.includes(`| \`${code}\` |`)]).toEqual([code, true])
      expect([code, guideList.includes(`\`${code}\``)]).toEqual([code, true])
    }
  })

  test('every instrument a store creates is listed in docs/metrics.md, and nothing there is still to come', async () => {
    class Reader extends MetricReader {
      protected onForceFlush(): Promise<void> {
        return Promise.resolve()
      }
      protected onShutdown(): Promise<void> {
        return Promise.resolve()
      }
    }
    const reader = new Reader()
    const s = fx.open(fx.file(), { meterProvider: new MeterProvider({ readers: [reader] }) })
    must(s.record(spawn(CHILD, MAIN)))
    must(await s.recordAsync(human(CHILD)))
    s.changesSince(CHILD, 0)
    const { resourceMetrics } = await reader.collect()
    const names = resourceMetrics.scopeMetrics.flatMap((m) => m.metrics.map((x) => x.descriptor.name)).sort()
    expect(names).toHaveLength(20)
    const doc = read('docs/metrics.md')
    for (const name of names) expect([name, doc.includes(`| \`${name}\``)]).toEqual([name, true])
    expect(doc).not.toMatch(/will be added|will be whether/)
  })
})
