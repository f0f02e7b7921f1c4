// The package as a user gets it: `npm pack` the root and this machine's platform package,
// install both offline into an empty project with no `cargo` on PATH, and prove that the
// installed package loads the prebuilt binary from the platform package (the root ships no
// .node) and works from CommonJS, from an ES module, from TypeScript and from its CLI.
import { spawnSync, type SpawnSyncOptions } from 'node:child_process'
import * as fs from 'node:fs'
import * as os from 'node:os'
import * as path from 'node:path'
import { fileURLToPath } from 'node:url'

import * as ts from 'typescript'

import { npmCli } from './npm-cli'

const ROOT = path.join(__dirname, '..')
const rootManifest = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'))
const PLATFORMS = [
  'linux-x64-gnu', 'linux-arm64-gnu', 'darwin-x64', 'darwin-arm64', 'win32-x64-msvc', 'linux-x64-musl',
  'linux-arm64-musl',
]
const ABI = platformArchAbi()
const PLATFORM_PACKAGE = `session-awareness-${ABI}`
const BINARY = `session-awareness.${ABI}.node`
// Tests that need a POSIX shell, or that spawn npm's `.bin` shim directly (on Windows it is a
// .cmd file, which Node starts only through a shell), skip there.
const posixOnly = process.platform === 'win32' ? test.skip : test

let work: string
let consumer: string
let env: NodeJS.ProcessEnv
const packed: Record<string, { filename: string; files: string[] }> = {}

function platformArchAbi(): string {
  const { platform, arch } = process
  if (platform === 'linux') {
    const header = process.report.getReport() as { header?: { glibcVersionRuntime?: string } }
    return `linux-${arch}-${header.header?.glibcVersionRuntime ? 'gnu' : 'musl'}`
  }
  return platform === 'win32' ? `win32-${arch}-msvc` : `${platform}-${arch}`
}


function run(cmd: string, args: string[], opts: SpawnSyncOptions = {}) {
  const out = spawnSync(cmd, args, { encoding: 'utf8', timeout: 240_000, env, ...opts })
  const result = { status: out.status, stdout: String(out.stdout), stderr: String(out.stderr) }
  if (out.error) throw out.error
  return result
}

function mustRun(cmd: string, args: string[], opts: SpawnSyncOptions = {}) {
  const out = run(cmd, args, opts)
  if (out.status !== 0) {
    throw new Error(`${path.basename(cmd)} ${args.join(' ')} exited ${out.status}\n${out.stderr}\n${out.stdout}`)
  }
  return out.stdout
}

function pack(dir: string) {
  const out = mustRun(process.execPath, [npmCli(), 'pack', '--json', '--pack-destination', work], {
    cwd: dir,
  })
  const [info] = JSON.parse(out.slice(out.indexOf('[')))
  return {
    filename: path.join(work, info.filename),
    files: info.files.map((f: { path: string }) => f.path).sort(),
  }
}

function filesUnder(dir: string): string[] {
  return fs.readdirSync(dir, { recursive: true, encoding: 'utf8' }).map((f) => path.join(dir, f))
}

beforeAll(() => {
  const binary = path.join(ROOT, 'npm', ABI, BINARY)
  if (!fs.existsSync(binary)) {
    throw new Error(`${path.relative(ROOT, binary)} is missing: run npm run build first`)
  }
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'sa-package-'))
  consumer = path.join(work, 'consumer')
  fs.mkdirSync(consumer)
  fs.writeFileSync(
    path.join(consumer, 'package.json'),
    JSON.stringify({ name: 'consumer', version: '1.0.0', private: true }),
  )
  // No cargo anywhere on PATH, no override of the binary's location.
  const dirs = [path.dirname(process.execPath), ...(process.env.PATH ?? '').split(path.delimiter)]
  env = { ...process.env, PATH: dirs.filter((d) => d && !['cargo', 'cargo.exe'].some((c) => fs.existsSync(path.join(d, c)))).join(path.delimiter) }
  delete env.NAPI_RS_NATIVE_LIBRARY_PATH
  delete env.NAPI_RS_FORCE_WASI
  delete env.NODE_OPTIONS
  env.NAPI_RS_ENFORCE_VERSION_CHECK = '1'

  packed.root = pack(ROOT)
  packed.platform = pack(path.join(ROOT, 'npm', ABI))
  mustRun(
    process.execPath,
    [npmCli(), 'install', '--offline', '--no-audit', '--no-fund', '--ignore-scripts',
      packed.root.filename, packed.platform.filename],
    { cwd: consumer },
  )
}, 300_000)

afterAll(() => {
  if (work) fs.rmSync(work, { recursive: true, force: true })
})

/** The modules of lib/, each shipped compiled with its declarations. */
const MODULES = [
  'args', 'async', 'call-args', 'context-key', 'drain-signal', 'errors', 'follow', 'gate', 'import', 'index', 'inspect', 'metrics', 'names',
  'notice-listener', 'packed', 'payload', 'session-state', 'store-options', 'types', 'versions',
  'openclaw/host', 'openclaw/index', 'openclaw/keys', 'openclaw/links', 'openclaw/producers', 'openclaw/reads',
  'openclaw/state', 'openclaw/types',
]

/** The documents the README links, shipped so that its links work where the package is read. */
const DOCS = [
  'BENCHMARKS.md', 'RELIABILITY.md', 'docs/architecture.md', 'docs/gateway-guide.md', 'docs/metrics.md',
  'docs/openclaw.md', 'docs/postgres.md', 'docs/releasing.md', 'docs/semantics.md', 'examples/gateway.ts',
]

test('the root tarball ships the TypeScript layer, the loader, types, CLI, license, changelog and docs, and no binary', () => {
  expect(packed.root.files).toEqual([
    'CHANGELOG.md', 'LICENSE', 'README.md', 'bin/session-awareness.js',
    ...MODULES.flatMap((m) => [`dist/${m}.d.ts`, `dist/${m}.js`]), 'dist/index.d.mts', 'dist/index.mjs',
    'dist/openclaw/index.d.mts', 'dist/openclaw/index.mjs', 'index.d.ts', 'index.js', 'package.json', ...DOCS,
  ].sort())
  expect(packed.platform.files).toEqual([BINARY, 'README.md', 'package.json'].sort())
  const installed = path.join(consumer, 'node_modules', 'session-awareness')
  expect(filesUnder(installed).filter((f) => f.endsWith('.node'))).toEqual([])
})

/** The relative links of a markdown text as [target, anchor] (web links left out; '' is the text itself). */
function relativeLinks(markdown: string): Array<[string, string | undefined]> {
  const out: Array<[string, string | undefined]> = []
  for (const m of markdown.matchAll(/\]\(([^)\s]+)\)/g)) {
    const [target, anchor] = (m[1] as string).split('#') as [string, string | undefined]
    if (!/^[a-z][a-z0-9+.-]*:/i.test(target)) out.push([target, anchor])
  }
  return out
}

/** The anchors of a markdown text: its `<a id>`s and the GitHub slugs of its headings. */
function anchorsOf(markdown: string): Set<string> {
  const out = new Set<string>()
  for (const m of markdown.matchAll(/<a id="([^"]+)"><\/a>/g)) out.add(m[1] as string)
  for (const m of markdown.matchAll(/^#{1,6} (.+)$/gm)) {
    out.add((m[1] as string).trim().toLowerCase().replace(/[^\p{L}\p{N} _-]/gu, '').replace(/ /g, '-'))
  }
  return out
}

test('every relative link of the README, and of each document it leads to, points at a file (and anchor) in the tarball', () => {
  const shipped = new Set(packed.root.files)
  const installed = path.join(consumer, 'node_modules', 'session-awareness')
  const seen = new Set<string>()
  const broken: string[] = []
  const queue = ['README.md']
  const text = (doc: string) => fs.readFileSync(path.join(installed, doc), 'utf8')
  while (queue.length > 0) {
    const doc = queue.shift() as string
    if (seen.has(doc)) continue
    seen.add(doc)
    for (const [link, anchor] of relativeLinks(text(doc))) {
      const target = link === '' ? doc : path.posix.normalize(path.posix.join(path.posix.dirname(doc), link))
      if (!shipped.has(target)) broken.push(`${doc} -> ${link}`)
      else if (target.endsWith('.md')) {
        queue.push(target)
        if (anchor !== undefined && !anchorsOf(text(target)).has(anchor)) broken.push(`${doc} -> ${link}#${anchor}`)
      }
    }
  }
  expect(broken).toEqual([])
  // The walk reached every shipped document from the README.
  expect([...seen].sort()).toEqual(['CHANGELOG.md', 'README.md', ...DOCS.filter((d) => d.endsWith('.md'))].sort())
})

test('package.json names the repository, its home page and where to report bugs, all one repository', () => {
  const installed = JSON.parse(
    fs.readFileSync(path.join(consumer, 'node_modules', 'session-awareness', 'package.json'), 'utf8'),
  )
  const repo = 'https://github.com/session-awareness/session-awareness'
  expect(installed.repository).toEqual({ type: 'git', url: `git+${repo}.git` })
  expect(installed.homepage).toBe(`${repo}#readme`)
  expect(installed.bugs).toEqual({ url: `${repo}/issues` })
})

test('the one runtime dependency is the OpenTelemetry API, a peer (docs/metrics.md#provider), installed with the package', () => {
  const installed = JSON.parse(
    fs.readFileSync(path.join(consumer, 'node_modules', 'session-awareness', 'package.json'), 'utf8'),
  )
  expect(installed.dependencies).toBeUndefined()
  expect(installed.peerDependencies).toEqual({ '@opentelemetry/api': '^1.3.0' })
  expect(installed.peerDependenciesMeta).toBeUndefined()
  expect(fs.existsSync(path.join(consumer, 'node_modules', '@opentelemetry', 'api', 'package.json'))).toBe(true)
})

test('the root lists every platform package, at its own version, in optionalDependencies', () => {
  const installed = JSON.parse(
    fs.readFileSync(path.join(consumer, 'node_modules', 'session-awareness', 'package.json'), 'utf8'),
  )
  const expected = Object.fromEntries(PLATFORMS.map((p) => [`session-awareness-${p}`, rootManifest.version]))
  expect(installed.optionalDependencies).toEqual(expected)
  for (const p of PLATFORMS) {
    const manifest = JSON.parse(fs.readFileSync(path.join(ROOT, 'npm', p, 'package.json'), 'utf8'))
    expect([manifest.name, manifest.version, manifest.main, manifest.files]).toEqual([
      `session-awareness-${p}`, rootManifest.version, `session-awareness.${p}.node`,
      [`session-awareness.${p}.node`],
    ])
    expect(fs.existsSync(path.join(ROOT, 'npm', p, 'README.md'))).toBe(true)
  }
  expect(installed.bin).toEqual({ 'session-awareness': 'bin/session-awareness.js' })
})

posixOnly('the install environment has no cargo', () => {
  expect(run('/bin/sh', ['-c', 'command -v cargo']).status).not.toBe(0)
})

const CJS_CHECK = `
const sa = require('session-awareness')
const path = require('node:path')
const T = Date.UTC(2030, 0, 1)
const state = new sa.SessionState(path.join(process.argv[2], 'cjs.sqlite'), { clock: () => T, strict: true })
const spawned = state.record({ sessionKey: 'agent:main:subagent:c', kind: 'child_spawned',
  actorType: 'agent', actorId: 'agent:main:main', summary: 'child spawned', watchers: ['agent:main:main'] })
const watched = state.watch('agent:main:main', 'agent:ops:main')
const human = state.record({ sessionKey: 'agent:main:subagent:c', kind: 'human_direct_message',
  actorType: 'human', summary: 'human message' })
const drained = state.drain('agent:main:main')
const delta = state.changesSince(drained[0].targetKey, drained[0].changesSince)
state.close()
console.log(JSON.stringify({
  resolved: require.resolve('session-awareness'),
  natives: Object.keys(require.cache).filter((f) => f.endsWith('.node')),
  target: sa.__napiBindingTarget,
  exports: Object.keys(sa).sort(),
  spawned: spawned.sequence, watched, human: human.sequence, drained,
  delta: delta.stateChanges.events.map((e) => [e.sequence, e.kind]),
}))
`

const ESM_CHECK = `
import { createRequire } from 'node:module'
import * as path from 'node:path'
import binding, { SessionState, encodeNoticeContextKey } from 'session-awareness'
import * as namespace from 'session-awareness'

const require = createRequire(import.meta.url)
const woken = []
const state = new SessionState(path.join(process.argv[2], 'esm.sqlite'), {
  wakeCoalesceMs: 0, wake: (req) => woken.push(req),
})
state.record({ sessionKey: 'agent:main:subagent:c', kind: 'child_spawned', actorType: 'agent',
  summary: 'spawned', watchers: ['agent:main:main'] })
state.record({ sessionKey: 'agent:main:subagent:c', kind: 'goal_changed', actorType: 'human',
  summary: 'goal edited' })
// The wake never holds the loop open by itself: poll until it arrives.
for (let i = 0; i < 600 && woken.length === 0; i++) await new Promise((r) => setTimeout(r, 50))
const drained = state.drain('agent:main:main')
state.close()
console.log(JSON.stringify({
  resolved: import.meta.resolve('session-awareness'),
  natives: Object.keys(require.cache).filter((f) => f.endsWith('.node')),
  sameAsRequire: binding === require('session-awareness') && SessionState === binding.SessionState,
  // __esModule: the interop marker of the compiled CommonJS entry, not an API name; Node 23
  // and later also expose a CommonJS module's whole exports object as 'module.exports'.
  esmNames: Object.keys(namespace)
    .filter((k) => k !== 'default' && k !== '__esModule' && k !== 'module.exports')
    .sort(),
  cjsNames: Object.keys(require('session-awareness')).sort(),
  woken, notices: drained.length, contextKey: drained[0].contextKey === encodeNoticeContextKey('agent:main:subagent:c'),
}))
`

function expectedNative(): string {
  return fs.realpathSync(path.join(consumer, 'node_modules', PLATFORM_PACKAGE, BINARY))
}

test('require() loads the platform package binary and records, watches and drains', () => {
  fs.writeFileSync(path.join(consumer, 'check.cjs'), CJS_CHECK)
  const out = JSON.parse(mustRun(process.execPath, ['check.cjs', consumer], { cwd: consumer }))
  expect(fs.realpathSync(out.resolved)).toBe(
    fs.realpathSync(path.join(consumer, 'node_modules', 'session-awareness', 'dist', 'index.js')),
  )
  expect(out.natives.map((f: string) => fs.realpathSync(f))).toEqual([expectedNative()])
  expect(out.target).toBe('native')
  expect(out.spawned).toBe(1)
  expect(out.watched).toBe(true)
  expect(out.human).toBe(2)
  expect(out.drained).toEqual([{
    watcherKey: 'agent:main:main',
    targetKey: 'agent:main:subagent:c',
    changesSince: 1,
    text: 'Session "agent:main:subagent:c" changed (other actor). Reconcile before acting: ' +
      'session_status sessionKey "agent:main:subagent:c" changesSince 1.',
    contextKey: `session-state:${Buffer.from('agent:main:subagent:c').toString('hex')}`,
  }])
  expect(out.delta).toEqual([[2, 'human_direct_message']])
})

test('import loads the same objects through dist/index.mjs, with the same names, and wakes', () => {
  fs.writeFileSync(path.join(consumer, 'check.mjs'), ESM_CHECK)
  const out = JSON.parse(mustRun(process.execPath, ['check.mjs', consumer], { cwd: consumer }))
  expect(fs.realpathSync(fileURLToPath(out.resolved))).toBe(
    fs.realpathSync(path.join(consumer, 'node_modules', 'session-awareness', 'dist', 'index.mjs')),
  )
  expect(out.natives.map((f: string) => fs.realpathSync(f))).toEqual([expectedNative()])
  expect(out.sameAsRequire).toBe(true)
  expect(out.esmNames).toEqual(out.cjsNames)
  expect(out.cjsNames).toEqual([
    'ActorType', 'EventKind', 'Provenance', 'SessionState', 'SessionStateError', '__napiBindingTarget',
    'decodeNoticeContextKey', 'encodeNoticeContextKey', 'importOpenClawState', 'inspectDatabase', 'readEvents',
  ])
  expect(out.woken).toEqual([{
    source: 'session-state', intent: 'immediate', reason: 'session-state:agent:main:subagent:c',
    sessionKey: 'agent:main:main',
  }])
  expect(out.notices).toBe(1)
  expect(out.contextKey).toBe(true)
})

posixOnly('the installed CLI inspects a database read-only', () => {
  const db = path.join(consumer, 'cjs.sqlite')
  const before = fs.readFileSync(db)
  const bin = path.join(consumer, 'node_modules', '.bin', 'session-awareness')
  const out = JSON.parse(mustRun(bin, ['inspect', db, '--json'], { cwd: consumer }))
  expect(out.counts).toEqual({ events: 2, heads: 1, cursors: 2, upstreamLinks: 0 })
  expect(out.cursors.map((c: { targetKey: string; lastSeen: number }) => [c.targetKey, c.lastSeen]))
    .toEqual([['agent:main:subagent:c', 2], ['agent:ops:main', 0]])
  expect(fs.readFileSync(db).equals(before)).toBe(true)
  const missing = run(bin, ['inspect', path.join(consumer, 'missing.sqlite')], { cwd: consumer })
  expect(missing.status).toBe(1)
})

test('the installed types compile a gateway usage file as CommonJS and as an ES module', () => {
  const usage = fs.readFileSync(path.join(ROOT, '__test__', 'types', 'usage.ts'), 'utf8')
  fs.writeFileSync(path.join(consumer, 'usage.cts'), usage)
  fs.writeFileSync(path.join(consumer, 'usage.mts'), usage)
  const openclaw = fs.readFileSync(path.join(ROOT, '__test__', 'types', 'openclaw-usage.ts'), 'utf8')
  fs.writeFileSync(path.join(consumer, 'openclaw-usage.cts'), openclaw)
  fs.writeFileSync(path.join(consumer, 'openclaw-usage.mts'), openclaw)
  fs.writeFileSync(path.join(consumer, 'tsconfig.json'), JSON.stringify({
    compilerOptions: {
      target: 'ES2022', module: 'node16', moduleResolution: 'node16', strict: true,
      noEmit: true, skipLibCheck: false, types: [],
    },
    files: ['usage.cts', 'usage.mts', 'openclaw-usage.cts', 'openclaw-usage.mts'],
  }))
  const tsc = path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc')
  const out = run(process.execPath, [tsc, '-p', 'tsconfig.json', '--listFiles'], { cwd: consumer })
  expect(out.stderr).toBe('')
  expect(out.status).toBe(0)
  const listed = out.stdout.split('\n').map((f) => path.relative(consumer, f))
  expect(listed).toEqual(expect.arrayContaining([
    'node_modules/session-awareness/dist/index.d.ts', 'node_modules/session-awareness/dist/index.d.mts',
    'node_modules/session-awareness/dist/session-state.d.ts', 'node_modules/session-awareness/dist/errors.d.ts',
    'node_modules/session-awareness/dist/openclaw/index.d.ts', 'node_modules/session-awareness/dist/openclaw/index.d.mts',
  ]))
})

test('the declarations document every export and member, and have no any', () => {
  const undocumented: string[] = []
  const anys: string[] = []
  for (const m of MODULES) {
    const file = path.join(consumer, 'node_modules', 'session-awareness', 'dist', `${m}.d.ts`)
    const source = ts.createSourceFile(file, fs.readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true)
    const name = (n: ts.Node) => `${m}:${(n as ts.Node & { name?: ts.Node }).name?.getText(source) ?? ts.SyntaxKind[n.kind]}`
    const documented = (n: ts.Node) => ts.getJSDocCommentsAndTags(n).length > 0
    for (const statement of source.statements) {
      // Imports and re-exports carry the documentation of what they name.
      if (ts.isImportDeclaration(statement) || ts.isExportDeclaration(statement)) continue
      if (!documented(statement)) undocumented.push(name(statement))
      if (ts.isInterfaceDeclaration(statement) || ts.isClassDeclaration(statement)) {
        for (const member of statement.members) {
          // Private fields (`#x`) are not API.
          if (ts.isPropertyDeclaration(member) && ts.isPrivateIdentifier(member.name)) continue
          if (!documented(member)) undocumented.push(`${name(statement)}.${name(member)}`)
        }
      }
    }
    const visit = (n: ts.Node): void => {
      if (n.kind === ts.SyntaxKind.AnyKeyword) anys.push(`${m}: ${n.parent.getText(source)}`)
      ts.forEachChild(n, visit)
    }
    visit(source)
  }
  expect(undocumented).toEqual([])
  expect(anys).toEqual([])
})

test('the string unions of the API are exported as objects of their values', () => {
  const out = JSON.parse(mustRun(process.execPath, ['-e',
    "const sa = require('session-awareness'); console.log(JSON.stringify([sa.EventKind, sa.ActorType, sa.Provenance].map(Object.values)))"],
  { cwd: consumer }))
  expect(out).toEqual([
    ['human_direct_message', 'goal_changed', 'upstream_missing', 'child_spawned', 'run_completed', 'run_failed',
      'compacted', 'adopted', 'created'],
    ['human', 'agent', 'system'],
    ['explicit', 'ambient-group'],
  ])
})
