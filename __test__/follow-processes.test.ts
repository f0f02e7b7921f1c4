// Following a session written by another process on the same file (semantics.md#follow): the
// store's poll tells the followers, and the batches are exactly the stored rows while both
// processes write. And the CLI's `events --follow`, a process of its own, like tail -f.
import * as childProcess from 'node:child_process'
import type { ChildProcess } from 'node:child_process'
import * as path from 'node:path'

import type { ChangeEvent, FollowBatch } from '../lib'
import { GatewayProcess, until } from './gateway-process'
import { SessionState, fixture } from './helpers'

jest.setTimeout(120_000)

const fx = fixture('follow-proc')
const K = 'agent:main:subagent:followed'
const input = (summary: string) => ({ sessionKey: K, kind: 'goal_changed' as const, actorType: 'agent' as const, summary })

class Writer extends GatewayProcess {
  static start(file: string): Promise<Writer> {
    return GatewayProcess.fork((child) => new Writer(child), file, { syncIntervalMs: 20 })
  }

  recordMany(inputs: Record<string, unknown>[]): Promise<(number | null)[]> {
    return this.call('recordMany', { inputs })
  }
}

afterEach(() => GatewayProcess.stopAll())

function stored(state: SessionState, after = 0): ChangeEvent[] {
  const out: ChangeEvent[] = []
  for (;;) {
    const c = state.changesSince(K, after)
    out.push(...c.stateChanges.events)
    if (!c.stateChanges.truncated) return out
    after = c.stateChanges.events.at(-1)!.sequence
  }
}

test('rows another process writes reach the follower through the poll; with both writing, the batches are exactly the stored rows', async () => {
  const file = fx.file()
  const state = fx.open(file, { syncIntervalMs: 20 })
  state.record(input('mine 0'))
  const writer = await Writer.start(file)
  const got: FollowBatch[] = []
  const f = state.follow(K, { limit: 50 })
  const reader = (async () => {
    for await (const b of f) got.push(b)
  })()
  // A row written only by the other process is seen without any write here.
  const [only] = await writer.recordMany([input('theirs alone')])
  await until(() => got.flatMap((b) => b.events).map((e) => e.sequence), (s) => s.includes(only!), 'the other process row')
  for (let round = 0; round < 5; round++) {
    const theirs = writer.recordMany(Array.from({ length: 60 }, (_, i) => input(`theirs ${round}.${i}`)))
    for (let i = 0; i < 20; i++) await state.recordAsync(input(`mine ${round}.${i}`))
    await theirs
  }
  const all = stored(state)
  expect(all).toHaveLength(1 + 1 + 5 * 80)
  await until(() => got.reduce((n, b) => n + b.events.length, 0), (n) => n >= all.length, 'every row')
  await f.return()
  await reader
  expect(got.every((b) => b.events.length >= 1 && b.events.length <= 50 && !b.historyGap)).toBe(true)
  expect(got.flatMap((b) => b.events)).toEqual(all)
})

const CLI = path.join(__dirname, '..', 'bin', 'session-awareness.js')

/** The CLI following `file`, its stdout lines collected. */
function followCli(file: string, extra: string[]): { p: ChildProcess; lines: string[]; exited: Promise<number | null> } {
  const p = childProcess.spawn(process.execPath, [CLI, 'events', file, K, '--follow', ...extra], {
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  const lines: string[] = []
  let buf = ''
  p.stdout!.on('data', (d: Buffer) => {
    buf += d.toString()
    const parts = buf.split('\n')
    buf = parts.pop()!
    lines.push(...parts)
  })
  const exited = new Promise<number | null>((resolve) => p.on('exit', (code) => resolve(code)))
  return { p, lines, exited }
}

test('events --follow --json prints what is stored, then each new event as it lands; Ctrl-C (SIGINT) exits 0', async () => {
  const file = fx.file()
  const state = fx.open(file)
  for (let i = 0; i < 3; i++) state.record(input(`before ${i}`))
  const cli = followCli(file, ['--json', '--since', '1'])
  await until(() => cli.lines.length, (n) => n >= 2, 'the stored events')
  state.record(input('live 1'))
  state.record(input('live 2'))
  await until(() => cli.lines.length, (n) => n >= 4, 'the live events')
  cli.p.kill('SIGINT')
  expect(await cli.exited).toBe(0)
  expect(cli.lines.map((l) => JSON.parse(l) as ChangeEvent)).toEqual(stored(state, 1))
})

test('events --follow in text prints one line per event, a pruned range as a history line; SIGTERM exits 0', async () => {
  const file = fx.file()
  const state = fx.open(file, { maxEvents: 2 })
  for (let i = 0; i < 4; i++) state.record(input(`e${i}`))
  state.prune()
  const cli = followCli(file, [])
  await until(() => cli.lines.length, (n) => n >= 3, 'the stored events')
  expect(cli.lines[0]).toBe('history    gap: events before #3 were pruned before they were read')
  expect(cli.lines.slice(1).map((l) => l.split('  ').filter((_, i) => i !== 1))).toEqual([
    ['#3', 'goal_changed', 'agent', '"e2"'],
    ['#4', 'goal_changed', 'agent', '"e3"'],
  ])
  cli.p.kill('SIGTERM')
  expect(await cli.exited).toBe(0)
})

test('events --follow refuses a file that does not exist (exit 1, ERR_DB) and belongs to events only (exit 2)', () => {
  const missing = childProcess.spawnSync(process.execPath, [CLI, 'events', fx.file(), K, '--follow', '--json'], { encoding: 'utf8' })
  expect([missing.status, JSON.parse(missing.stderr).error.code]).toEqual([1, 'ERR_DB'])
  const file = fx.file()
  fx.open(file).record(input('x'))
  const misplaced = childProcess.spawnSync(process.execPath, [CLI, 'inspect', file, '--follow', '--json'], { encoding: 'utf8' })
  expect([misplaced.status, JSON.parse(misplaced.stderr).error.code]).toEqual([2, 'ERR_USAGE'])
})
