// Metrics with the OpenTelemetry SDK a host has (docs/metrics.md#provider): the packed
// package installed into empty projects beside `@opentelemetry/sdk-metrics` 2.x on Node 20
// (whose peer range stops below API 1.10) and 3.x on Node 24, from npm's registry. Each
// project has one copy of `@opentelemetry/api` (the package takes it as a peer), the store
// reports every instrument through the global provider and through the `meterProvider`
// option with exact counts, and `tsc --strict` accepts `{ meterProvider }` of that SDK. A
// provider registered through an API copy the store's copy refuses is told once, as a warning.
//
// Run by `npm run test:package` under Node 20, which runs the Node 24 project with
// scripts/node24.sh's Node; Jest's own Node 24 run skips this file (it would repeat both).
import { spawnSync, type SpawnSyncOptions } from 'node:child_process'
import * as fs from 'node:fs'
import * as os from 'node:os'
import * as path from 'node:path'

import * as ts from 'typescript'

import { npmCli } from './npm-cli'

const ROOT = path.join(__dirname, '..')
const NODE24 = path.join(ROOT, '.tmp', 'node24', 'node', 'bin', 'node')
const onNode20 = Number(process.versions.node.split('.')[0]) < 22
const linuxX64 = process.platform === 'linux' && process.arch === 'x64'
const suite = onNode20 ? describe : describe.skip

let work = ''
const tarballs: string[] = []

function run(cmd: string, args: string[], opts: SpawnSyncOptions = {}): string {
  const env = { ...process.env }
  delete env.NODE_OPTIONS
  delete env.NAPI_RS_NATIVE_LIBRARY_PATH
  const out = spawnSync(cmd, args, { encoding: 'utf8', timeout: 240_000, env, ...opts })
  if (out.error) throw out.error
  if (out.status !== 0) {
    throw new Error(`${path.basename(cmd)} ${args.join(' ')} exited ${out.status}\n${String(out.stderr)}\n${String(out.stdout)}`)
  }
  return String(out.stdout)
}


function platformPackage(): string {
  const header = process.report.getReport() as { header?: { glibcVersionRuntime?: string } }
  return path.join(ROOT, 'npm', `linux-${process.arch}-${header.header?.glibcVersionRuntime ? 'gnu' : 'musl'}`)
}

/** What the scenario printed: the instruments exported, and the counts of the scenario. */
const SCENARIO = String.raw`
const { metrics } = require('@opentelemetry/api')
const { MeterProvider, MetricReader } = require('@opentelemetry/sdk-metrics')
const { SessionState } = require('session-awareness')

class Reader extends MetricReader {
  onForceFlush() { return Promise.resolve() }
  onShutdown() { return Promise.resolve() }
}

async function scenario(how) {
  const reader = new Reader()
  const provider = new MeterProvider({ readers: [reader] })
  if (how === 'global') metrics.setGlobalMeterProvider(provider)
  const s = new SessionState(':memory:', how === 'option' ? { meterProvider: provider } : {})
  const W = 'agent:main:main'
  const C = 'agent:main:subagent:c'
  s.record({ sessionKey: C, kind: 'child_spawned', actorType: 'agent', actorId: W, summary: 'spawn', watchers: [W] })
  s.record({ sessionKey: C, kind: 'human_direct_message', actorType: 'human', summary: 'hi' })
  await s.recordAsync({ sessionKey: C, kind: 'run_completed', actorType: 'agent', summary: 'done' })
  const drained = s.drain(W).length
  s.changesSince(C, 0)
  const { resourceMetrics } = await reader.collect()
  const all = resourceMetrics.scopeMetrics.flatMap((m) => m.metrics)
  const point = (name, attrs) => {
    const want = JSON.stringify({ 'session_awareness.store': 'sqlite', ...attrs })
    const m = all.find((x) => x.descriptor.name === name)
    const p = m && m.dataPoints.find((d) => JSON.stringify(d.attributes) === want)
    return p === undefined ? null : typeof p.value === 'number' ? p.value : p.value.count
  }
  s.close()
  if (how === 'global') metrics.disable()
  return {
    drained,
    instruments: all.length,
    recorded: ['child_spawned', 'human_direct_message', 'run_completed', 'created'].map((kind) =>
      point('session_awareness.events.recorded', { kind })),
    delivered: point('session_awareness.notices.delivered', {}),
    opened: point('session_awareness.notices.opened', { reason: 'new' }),
    recordSync: point('session_awareness.record.duration', { api: 'sync' }),
    recordAsync: point('session_awareness.record.duration', { api: 'async' }),
    groups: point('session_awareness.commit.group_size', {}),
    changesSince: point('session_awareness.changes_since.duration', {}),
  }
}

;(async () => {
  const out = { api: JSON.parse(require('node:fs').readFileSync('node_modules/@opentelemetry/api/package.json', 'utf8')).version }
  out.global = await scenario('global')
  out.option = await scenario('option')
  console.log(JSON.stringify(out))
})()
`

/** `{ meterProvider }` as a gateway writes it, type-checked as CommonJS with --strict. */
const USAGE = `
import { metrics } from '@opentelemetry/api'
import { MeterProvider } from '@opentelemetry/sdk-metrics'
import { SessionState, type SessionStateOptions } from 'session-awareness'

const meterProvider = new MeterProvider()
metrics.setGlobalMeterProvider(meterProvider)
const options: SessionStateOptions = { meterProvider, onError: (e) => void e.during }
const state = new SessionState('/tmp/state.sqlite', { meterProvider })
void [options, state]
`

const EACH = {
  drained: 1,
  instruments: 20,
  recorded: [1, 1, 1, 0],
  delivered: 1,
  opened: 1,
  recordSync: 2,
  recordAsync: 1,
  groups: 1,
  changesSince: 1,
}

/** An empty project with the packed package and `sdk` installed by `node`'s npm. */
function project(name: string, node: string, sdk: string): string {
  const dir = path.join(work, name)
  fs.mkdirSync(dir)
  fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name, version: '1.0.0', private: true }))
  run(node, [npmCli(), 'install', '--no-audit', '--no-fund', '--ignore-scripts', '--prefer-offline', ...tarballs, sdk], {
    cwd: dir,
  })
  return dir
}

/** The paths of every installed copy of `@opentelemetry/api` in `dir`. */
function apiCopies(dir: string): string[] {
  return fs
    .readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith(path.join('@opentelemetry', 'api', 'package.json')))
    .map((f) => path.dirname(f))
    .sort()
}

/** `tsc --strict` diagnostics of USAGE in `dir`, as `TS<code>` strings (none expected). */
function typeErrors(dir: string): string[] {
  const file = path.join(dir, 'usage.cts')
  fs.writeFileSync(file, USAGE)
  const program = ts.createProgram([file], {
    strict: true,
    noEmit: true,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2022,
    skipLibCheck: true,
    types: [],
  })
  return ts.getPreEmitDiagnostics(program).map((d) => `TS${d.code}: ${ts.flattenDiagnosticMessageText(d.messageText, ' ')}`)
}

suite('the packed package beside the SDK a host has', () => {
  beforeAll(() => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'sa-otel-'))
    for (const dir of [ROOT, platformPackage()]) {
      const out = run(process.execPath, [npmCli(), 'pack', '--json', '--pack-destination', work], { cwd: dir })
      tarballs.push(path.join(work, JSON.parse(out.slice(out.indexOf('[')))[0].filename))
    }
    const manifest = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'))
    expect(manifest.dependencies?.['@opentelemetry/api']).toBeUndefined()
    expect(manifest.peerDependencies).toEqual({ '@opentelemetry/api': '^1.3.0' })
  }, 300_000)

  afterAll(() => {
    if (work) fs.rmSync(work, { recursive: true, force: true })
  })

  test('Node 20, sdk-metrics 2.x: one API copy (1.9), every instrument through the global provider and the option, tsc --strict', () => {
    const dir = project('node20-sdk2', process.execPath, '@opentelemetry/sdk-metrics@2')
    expect(apiCopies(dir)).toEqual([path.join('node_modules', '@opentelemetry', 'api')])
    const out = JSON.parse(run(process.execPath, ['-e', SCENARIO], { cwd: dir }))
    expect(out.api).toMatch(/^1\.9\./)
    expect(out.global).toEqual(EACH)
    expect(out.option).toEqual(EACH)
    expect(typeErrors(dir)).toEqual([])
  }, 300_000)

  const node24 = linuxX64 ? test : test.skip
  node24('Node 24, sdk-metrics 3.x: one API copy (1.10), every instrument both ways, tsc --strict', () => {
    if (!fs.existsSync(NODE24)) run('bash', [path.join(ROOT, 'scripts', 'node24.sh'), '--install-only'], { cwd: ROOT })
    const dir = project('node24-sdk3', NODE24, '@opentelemetry/sdk-metrics@3')
    expect(apiCopies(dir)).toEqual([path.join('node_modules', '@opentelemetry', 'api')])
    const out = JSON.parse(run(NODE24, ['-e', SCENARIO], { cwd: dir }))
    expect(out.api).toMatch(/^1\.10\./)
    expect(out.global).toEqual(EACH)
    expect(out.option).toEqual(EACH)
    expect(typeErrors(dir)).toEqual([])
  }, 300_000)

  test('a provider registered through an API copy the store refuses: one warning per process, stats() still counts', () => {
    const dir = path.join(work, 'node20-sdk2')
    // An older API copy registers the host's provider; the store's (newer) copy refuses it.
    run(process.execPath, [npmCli(), 'install', '--no-audit', '--no-fund', '--prefer-offline',
      '--prefix', path.join(dir, 'old'), '@opentelemetry/api@1.3.0'], { cwd: dir })
    const script = `
      const old = require('./old/node_modules/@opentelemetry/api')
      const { MeterProvider } = require('@opentelemetry/sdk-metrics')
      old.metrics.setGlobalMeterProvider(new MeterProvider())
      const warnings = []
      process.on('warning', (w) => warnings.push(w.code))
      const { SessionState } = require('session-awareness')
      const a = new SessionState(':memory:')
      const b = new SessionState(':memory:')
      a.record({ sessionKey: 'agent:main:x', kind: 'created', actorType: 'system', summary: 's' })
      setImmediate(() => {
        console.log(JSON.stringify({ warnings, events: a.stats().eventsRecorded.created }))
        a.close(); b.close()
      })
    `
    expect(JSON.parse(run(process.execPath, ['-e', script], { cwd: dir }))).toEqual({
      warnings: ['SESSION_AWARENESS_NOOP_METER'],
      events: 1,
    })
  }, 300_000)
})
