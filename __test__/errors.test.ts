// SessionStateError: every throw and every onError report is one, with a stable code, and
// one class serves CommonJS and ES modules. The package runs without code generation from
// strings.
import { spawnSync } from 'node:child_process'
import * as fs from 'node:fs'
import * as path from 'node:path'

import { SessionStateError } from '../lib'
import * as native from '../index.js'
import { ERROR_CODES, LAYER_CODES, isErrorCode } from '../lib/errors'
import { SessionState, errorSink, fixture } from './helpers'

const fx = fixture('errors')
const ROOT = path.join(__dirname, '..')

function thrown(fn: () => unknown): unknown {
  try {
    fn()
  } catch (e) {
    return e
  }
  throw new Error('expected a throw')
}

test('argument, closed-store and database failures throw a SessionStateError with their code', () => {
  const s = fx.open(fx.file())
  const bad = thrown(() => s.watch(42 as unknown as string, 'agent:main:main'))
  const badCore = thrown(() => s.changesSince('agent:main:main', -1))
  s.close()
  const closed = thrown(() => s.stateVersion('agent:main:main'))
  const db = thrown(() => new SessionState(fx.dir()))
  for (const [e, code] of [[bad, 'ERR_INVALID_ARG'], [badCore, 'ERR_INVALID_ARG'], [closed, 'ERR_CLOSED'], [db, 'ERR_DB']] as const) {
    expect(e).toBeInstanceOf(SessionStateError)
    expect(e).toBeInstanceOf(Error)
    expect((e as SessionStateError).code).toBe(code)
    expect((e as SessionStateError).name).toBe('SessionStateError')
  }
})

test('record reports a SessionStateError to onError exactly once, and strict throws it', () => {
  const sink = errorSink()
  const s = fx.open(fx.file(), { onError: sink.onError })
  expect(s.record({ sessionKey: '', kind: 'created', actorType: 'system', summary: 'x' })).toBeNull()
  expect(s.record({ sessionKey: 'agent:main:main', kind: 'created', actorType: 'system', summary: 'x', payload: { n: 1n } })).toBeNull()
  s.close()
  expect(s.record({ sessionKey: 'agent:main:main', kind: 'created', actorType: 'system', summary: 'x' })).toBeNull()
  expect(sink.codes()).toEqual(['ERR_INVALID_ARG', 'ERR_INVALID_ARG', 'ERR_CLOSED'])
  expect(sink.errors.every((e) => e instanceof SessionStateError)).toBe(true)
  const strict = fx.open(fx.file(), { strict: true })
  const e = thrown(() => strict.record({ sessionKey: 'agent:main:main', kind: 'nope' as never, actorType: 'system', summary: 'x' }))
  expect(e).toBeInstanceOf(SessionStateError)
  expect((e as SessionStateError).code).toBe('ERR_INVALID_ARG')
})

test('a throwing wake reaches onError as a SessionStateError with ERR_WAKE_CALLBACK', async () => {
  const sink = errorSink()
  const s = fx.open(fx.file(), {
    onError: sink.onError,
    wakeCoalesceMs: 0,
    wake: () => {
      throw new Error('boom')
    },
  })
  s.record({ sessionKey: 'agent:main:subagent:c', kind: 'child_spawned', actorType: 'agent', summary: 's', watchers: ['agent:main:main'] })
  s.record({ sessionKey: 'agent:main:subagent:c', kind: 'goal_changed', actorType: 'human', summary: 'g' })
  for (let i = 0; i < 400 && sink.errors.length === 0; i++) await new Promise((r) => setTimeout(r, 25))
  expect(sink.codes()).toEqual(['ERR_WAKE_CALLBACK'])
  expect(sink.errors[0]).toBeInstanceOf(SessionStateError)
})

const BOTH = `
const cjs = require(process.argv[1])
import(process.argv[1].replace(/\\/?$/, '/dist/index.mjs')).then((esm) => {
  let caught
  try { new esm.SessionState(42) } catch (e) { caught = e }
  console.log(JSON.stringify({
    sameClass: esm.SessionStateError === cjs.SessionStateError && esm.SessionState === cjs.SessionState,
    defaultIsCjs: esm.default === cjs,
    instanceofCjs: caught instanceof cjs.SessionStateError,
    instanceofEsm: caught instanceof esm.SessionStateError,
    code: caught.code,
  }))
})
`

test('the ES module entry re-exports the CommonJS classes: instanceof holds across both', () => {
  const out = spawnSync(process.execPath, ['-e', BOTH, ROOT], { encoding: 'utf8', timeout: 60_000 })
  expect(out.stderr).toBe('')
  expect(JSON.parse(out.stdout)).toEqual({
    sameClass: true, defaultIsCjs: true, instanceofCjs: true, instanceofEsm: true, code: 'ERR_INVALID_ARG',
  })
})

const NO_EVAL = `
const { SessionState } = require(process.argv[1])
const path = require('node:path')
let evalRefused = false
try { new Function('return 1') } catch { evalRefused = true }
const s = new SessionState(path.join(process.argv[2], 'no-eval.sqlite'), { strict: true })
const spawned = s.record({ sessionKey: 'agent:main:subagent:c', kind: 'child_spawned', actorType: 'agent', summary: 's', watchers: ['agent:main:main'] })
s.record({ sessionKey: 'agent:main:subagent:c', kind: 'goal_changed', actorType: 'human', summary: 'g', payload: { k: 'v' } })
const drained = s.drain('agent:main:main')
const again = s.drain('agent:main:main')
const delta = s.changesSince('agent:main:subagent:c', drained[0].changesSince)
s.close()
console.log(JSON.stringify({ evalRefused, spawned: spawned.sequence, drained: drained.map((n) => n.changesSince), again,
  delta: delta.stateChanges.events.map((e) => [e.sequence, e.kind, e.payload]) }))
`

test('record, drain and changesSince work under --disallow-code-generation-from-strings', () => {
  const out = spawnSync(process.execPath, ['--disallow-code-generation-from-strings', '-e', NO_EVAL, ROOT, fx.dir()], {
    encoding: 'utf8',
    timeout: 60_000,
  })
  expect(out.stderr).toBe('')
  expect(JSON.parse(out.stdout)).toEqual({
    evalRefused: true, spawned: 1, drained: [1], again: [], delta: [[2, 'goal_changed', { k: 'v' }]],
  })
})

test('every code the Rust side can produce is one of ErrorCode, and nothing else is', () => {
  const sources = ['crates/core/src', 'src'].flatMap((dir) => {
    const files: string[] = []
    const walk = (d: string): void => {
      for (const f of fs.readdirSync(path.join(ROOT, d), { withFileTypes: true })) {
        const rel = path.join(d, f.name)
        if (f.isDirectory()) walk(rel)
        else if (f.name.endsWith('.rs')) files.push(rel)
      }
    }
    walk(dir)
    return files
  })
  const codes = new Set<string>()
  for (const f of sources) {
    for (const m of fs.readFileSync(path.join(ROOT, f), 'utf8').matchAll(/"(ERR_[A-Z_]+)"/g)) codes.add(m[1])
  }
  expect(codes.size).toBeGreaterThanOrEqual(8)
  for (const code of codes) expect([code, isErrorCode(code)]).toEqual([code, true])
  expect(isErrorCode('ERR_NOT_A_CODE')).toBe(false)
})

test('the ErrorCode union is exactly the addon\'s codes (the core\'s: a record\'s, then an open\'s; then the binding\'s) and the TypeScript layer\'s own', () => {
  const nativeCodes = native.nativeErrorCodes()
  expect(nativeCodes.slice(0, 9)).toEqual([
    'ERR_INVALID_ARG',
    'ERR_CLOSED',
    'ERR_DB',
    'ERR_UPSTREAM_PARSE',
    'ERR_NOT_SQLITE',
    'ERR_FILE_SHARED',
    'ERR_FOREIGN_SCHEMA',
    'ERR_IMPORT_DIVERGED',
    'ERR_OUTCOME_UNKNOWN',
  ])
  expect(nativeCodes.slice(9)).toEqual(['ERR_POOLER_MODE', 'ERR_WAKE_CALLBACK', 'ERR_PROGRESS_CALLBACK'])
  const all = [...nativeCodes, ...LAYER_CODES]
  expect(new Set(all).size).toBe(all.length)
  expect([...all].sort()).toEqual([...ERROR_CODES].sort())
})
