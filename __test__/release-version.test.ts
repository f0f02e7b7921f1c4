// scripts/release-version.js (`npm run release:version -- X.Y.Z`) on a throwaway copy of the
// files that spell the version: every place moves to the new version, the loader then accepts
// a platform package at that version and refuses one at the old, and the manifests pass the
// release workflow's check for the new tag.
import { spawnSync } from 'node:child_process'
import * as fs from 'node:fs'
import * as os from 'node:os'
import * as path from 'node:path'

const ROOT = path.join(__dirname, '..')
const rootManifest = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'))
const OLD: string = rootManifest.version
const NEW = '7.8.9-rc.1'
const PLATFORMS = [
  'linux-x64-gnu', 'linux-arm64-gnu', 'darwin-x64', 'darwin-arm64', 'win32-x64-msvc', 'linux-x64-musl',
  'linux-arm64-musl',
]
const SCRIPTS = ['release-version.js', 'lock-platform-packages.js', 'release-manifests.js']

let dir: string

/** The generated loader's spellings of `version`: its version checks and their messages. */
const spellings = (text: string, version: string) =>
  text.split(`bindingPackageVersion !== '${version}'`).length - 1 +
  text.split(`version mismatch, expected ${version} but got`).length - 1

/** This machine's napi platformArchABI, the platform package the loader asks for here. */
function platformArchAbi(): string {
  const { platform, arch } = process
  if (platform === 'linux') {
    const header = process.report.getReport() as { header?: { glibcVersionRuntime?: string } }
    return `linux-${arch}-${header.header?.glibcVersionRuntime ? 'gnu' : 'musl'}`
  }
  return platform === 'win32' ? `win32-${arch}-msvc` : `${platform}-${arch}`
}

beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sa-version-'))
  for (const f of ['package.json', 'package-lock.json', 'index.js']) {
    fs.copyFileSync(path.join(ROOT, f), path.join(dir, f))
  }
  fs.mkdirSync(path.join(dir, 'scripts'))
  for (const s of SCRIPTS) fs.copyFileSync(path.join(ROOT, 'scripts', s), path.join(dir, 'scripts', s))
  for (const p of PLATFORMS) {
    fs.mkdirSync(path.join(dir, 'npm', p), { recursive: true })
    fs.copyFileSync(path.join(ROOT, 'npm', p, 'package.json'), path.join(dir, 'npm', p, 'package.json'))
  }
  // The napi CLI, which the scripts ask for the platform folders, from the repository's install.
  fs.mkdirSync(path.join(dir, 'node_modules'))
  fs.symlinkSync(path.join(ROOT, 'node_modules', '@napi-rs'), path.join(dir, 'node_modules', '@napi-rs'), 'junction')
})
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }))

const run = (script: string, ...args: string[]) => {
  const out = spawnSync(process.execPath, [path.join(dir, 'scripts', script), ...args], { cwd: dir, encoding: 'utf8' })
  return { status: out.status, stdout: out.stdout, stderr: out.stderr }
}
const read = (f: string) => fs.readFileSync(path.join(dir, f), 'utf8')
const readJson = (f: string) => JSON.parse(read(f))

/** Loads the copied loader with a stand-in platform package at `version`, the check enforced. */
function loadWith(version: string) {
  const abi = platformArchAbi()
  const pkgDir = path.join(dir, 'node_modules', `session-awareness-${abi}`)
  fs.rmSync(pkgDir, { recursive: true, force: true })
  fs.mkdirSync(pkgDir)
  fs.writeFileSync(path.join(pkgDir, 'package.json'), JSON.stringify({ name: `session-awareness-${abi}`, version, main: 'binding.js' }))
  fs.writeFileSync(path.join(pkgDir, 'binding.js'), 'module.exports = { standIn: true }\n')
  const env: NodeJS.ProcessEnv = { ...process.env, NAPI_RS_ENFORCE_VERSION_CHECK: '1' }
  delete env.NAPI_RS_NATIVE_LIBRARY_PATH
  delete env.NAPI_RS_FORCE_WASI
  const out = spawnSync(process.execPath, ['-e', 'console.log(JSON.stringify(require("./index.js").standIn === true))'], {
    cwd: dir, encoding: 'utf8', env,
  })
  return { status: out.status, stdout: out.stdout.trim(), mismatch: /version mismatch, expected (\S+) but got (\S+)\./.exec(out.stderr)?.slice(1) }
}

test('one command moves every manifest, the optional dependencies, the lockfile and the loader', () => {
  const loaderBefore = read('index.js')
  const checks = spellings(loaderBefore, OLD)
  expect(checks).toBeGreaterThanOrEqual(2 * PLATFORMS.length)

  const out = run('release-version.js', NEW)
  expect([out.status, out.stderr]).toEqual([0, ''])

  const pkg = readJson('package.json')
  expect(pkg.version).toBe(NEW)
  expect(pkg.optionalDependencies).toEqual(
    Object.fromEntries([...PLATFORMS].sort().map((p) => [`session-awareness-${p}`, NEW])),
  )
  for (const p of PLATFORMS) expect(readJson(`npm/${p}/package.json`).version).toBe(NEW)
  // Nothing else in a manifest moved.
  expect({ ...pkg, version: OLD, optionalDependencies: rootManifest.optionalDependencies }).toEqual(rootManifest)

  const loader = read('index.js')
  expect([spellings(loader, NEW), spellings(loader, OLD)]).toEqual([checks, 0])
  // The loader differs in its version spellings only.
  expect(loader.split(NEW).join(OLD)).toBe(loaderBefore)

  const lock = readJson('package-lock.json')
  expect([lock.version, lock.packages[''].version]).toEqual([NEW, NEW])
  expect(Object.values(lock.packages[''].optionalDependencies)).toEqual(PLATFORMS.map(() => NEW))
  for (const p of PLATFORMS) expect(lock.packages[`npm/${p}`].version).toBe(NEW)
  expect(run('lock-platform-packages.js', '--check').status).toBe(0)

  // The release workflow's first check passes for the new tag, and refuses the old one.
  expect(run('release-manifests.js', 'check', `v${NEW}`).status).toBe(0)
  expect(run('release-manifests.js', 'check', `v${OLD}`).status).toBe(1)
})

test('the bumped loader accepts a platform package at the new version and refuses the old', () => {
  expect(loadWith(OLD)).toEqual({ status: 0, stdout: 'true', mismatch: undefined })
  expect(run('release-version.js', NEW).status).toBe(0)
  expect(loadWith(NEW)).toEqual({ status: 0, stdout: 'true', mismatch: undefined })
  const refused = loadWith(OLD)
  expect(refused.status).not.toBe(0)
  expect(refused.mismatch).toEqual([NEW, OLD])
})

test('a malformed version, or files not at one version, are refused and nothing is written', () => {
  const snapshot = () => ['package.json', 'package-lock.json', 'index.js', ...PLATFORMS.map((p) => `npm/${p}/package.json`)]
    .map((f) => read(f))
  const before = snapshot()
  for (const bad of ['', 'v1.2.3', '1.2', 'latest']) {
    const out = bad ? run('release-version.js', bad) : run('release-version.js')
    expect(out.status).toBe(1)
    expect(snapshot()).toEqual(before)
  }
  const m = readJson('npm/darwin-x64/package.json')
  fs.writeFileSync(path.join(dir, 'npm/darwin-x64/package.json'), JSON.stringify({ ...m, version: '0.0.1' }))
  const stale = snapshot()
  const out = run('release-version.js', NEW)
  expect(out.status).toBe(1)
  expect(out.stderr).toContain('npm/darwin-x64/package.json')
  expect(snapshot()).toEqual(stale)
})
