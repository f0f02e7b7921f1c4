// scripts/release-manifests.js, the release workflow's manifest steps, on copies of the real
// manifests: `check` refuses a tag or a platform package out of step with package.json, and
// `stamp` writes the repository and LICENSE everywhere, or nothing when it refuses.
import { spawnSync } from 'node:child_process'
import * as fs from 'node:fs'
import * as os from 'node:os'
import * as path from 'node:path'

const ROOT = path.join(__dirname, '..')
const SCRIPT = path.join(ROOT, 'scripts', 'release-manifests.js')
const rootManifest = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'))
const VERSION: string = rootManifest.version
const PLATFORMS = [
  'linux-x64-gnu', 'linux-arm64-gnu', 'darwin-x64', 'darwin-arm64', 'win32-x64-msvc', 'linux-x64-musl',
  'linux-arm64-musl',
]
const URL = 'https://github.com/example-org/session-awareness'
const LICENSE_TEXT = 'MIT License\n\nCopyright (c) 2026 test\n'

let dir: string

/** A fresh package root: the real package.json and platform manifests, and a LICENSE. */
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sa-release-'))
  fs.copyFileSync(path.join(ROOT, 'package.json'), path.join(dir, 'package.json'))
  fs.writeFileSync(path.join(dir, 'LICENSE'), LICENSE_TEXT)
  for (const p of PLATFORMS) {
    fs.mkdirSync(path.join(dir, 'npm', p), { recursive: true })
    fs.copyFileSync(path.join(ROOT, 'npm', p, 'package.json'), path.join(dir, 'npm', p, 'package.json'))
  }
})
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }))

function run(...args: string[]) {
  const out = spawnSync(process.execPath, [SCRIPT, ...args], { cwd: dir, encoding: 'utf8' })
  return { status: out.status, stdout: out.stdout, problems: out.stderr.split('\n').filter(Boolean) }
}

const read = (file: string) => JSON.parse(fs.readFileSync(path.join(dir, file), 'utf8'))
const edit = (file: string, change: (m: Record<string, unknown>) => void) => {
  const m = read(file)
  change(m)
  fs.writeFileSync(path.join(dir, file), JSON.stringify(m, null, 2))
}

/** Every file under the root with its bytes, to prove a refused call wrote nothing. */
function snapshot(): Record<string, string> {
  const files = fs.readdirSync(dir, { recursive: true, encoding: 'utf8' }).sort()
  return Object.fromEntries(
    files
      .filter((f) => fs.statSync(path.join(dir, f)).isFile())
      .map((f) => [f, fs.readFileSync(path.join(dir, f), 'utf8')]),
  )
}

describe('check <tag>', () => {
  test('the tag of the version passes and names every package', () => {
    const out = run('check', `v${VERSION}`)
    expect([out.status, out.stdout, out.problems]).toEqual([
      0, `v${VERSION}: session-awareness and 7 platform packages at ${VERSION}\n`, [],
    ])
  })

  test('a tag of another version, or without the v, is refused', () => {
    for (const tag of ['v9.9.9', VERSION, `v${VERSION}-rc.1`]) {
      const out = run('check', tag)
      expect([out.status, out.problems.length]).toEqual([1, 1])
    }
  })

  test('a platform package left at another version is refused, naming it', () => {
    edit('npm/darwin-x64/package.json', (m) => { m.version = '0.0.9' })
    const out = run('check', `v${VERSION}`)
    expect(out.status).toBe(1)
    expect(out.problems).toHaveLength(1)
    expect(out.problems[0]).toContain('npm/darwin-x64/package.json')
  })

  test('an optional dependency at another version, missing, or extra is refused', () => {
    edit('package.json', (m) => {
      const deps = m.optionalDependencies as Record<string, string>
      deps['session-awareness-win32-x64-msvc'] = '0.0.9'
      delete deps['session-awareness-linux-arm64-gnu']
      deps['session-awareness-linux-riscv64-gnu'] = VERSION
    })
    const out = run('check', `v${VERSION}`)
    expect(out.status).toBe(1)
    expect(out.problems).toHaveLength(3)
    for (const [i, name] of ['linux-arm64-gnu', 'win32-x64-msvc', 'linux-riscv64-gnu'].entries()) {
      expect(out.problems[i]).toContain(`session-awareness-${name}`)
    }
  })

  test('a napi target without its platform folder, or with a renamed package, is refused', () => {
    fs.rmSync(path.join(dir, 'npm', 'linux-arm64-gnu'), { recursive: true })
    edit('npm/darwin-arm64/package.json', (m) => { m.name = 'session-awareness-darwin' })
    const out = run('check', `v${VERSION}`)
    expect(out.status).toBe(1)
    expect(out.problems).toHaveLength(2)
    expect(out.problems[0]).toContain('npm/linux-arm64-gnu/package.json')
    expect(out.problems[1]).toContain('npm/darwin-arm64/package.json')
  })
})

describe('stamp <repository-url>', () => {
  test('writes the repository into every manifest and LICENSE into every platform package', () => {
    // A root that names no repository yet.
    edit('package.json', (m) => { delete m.repository })
    const before = snapshot()
    const out = run('stamp', URL)
    expect(out.status).toBe(0)
    const repository = { type: 'git', url: `git+${URL}.git` }
    expect(read('package.json')).toEqual({ ...JSON.parse(before['package.json']), repository })
    for (const p of PLATFORMS) {
      const manifest = `npm/${p}/package.json`
      expect(read(manifest)).toEqual({ ...JSON.parse(before[manifest]), repository })
      expect(fs.readFileSync(path.join(dir, 'npm', p, 'LICENSE'), 'utf8')).toBe(LICENSE_TEXT)
    }
    expect(out.stdout.trimEnd().split('\n')).toHaveLength(PLATFORMS.length)
  })

  test("the real root's own repository is accepted and kept", () => {
    const own = rootManifest.repository.url.replace(/^git\+/, '').replace(/\.git$/, '')
    expect(run('stamp', own).status).toBe(0)
    expect(read('package.json').repository).toEqual(rootManifest.repository)
    expect(read('npm/linux-x64-gnu/package.json').repository).toEqual(rootManifest.repository)
  })

  test('a root that already names this repository keeps its own spelling of it', () => {
    edit('package.json', (m) => { m.repository = { type: 'git', url: `${URL}/` } })
    expect(run('stamp', URL).status).toBe(0)
    expect(read('package.json').repository).toEqual({ type: 'git', url: `${URL}/` })
    expect(read('npm/win32-x64-msvc/package.json').repository).toEqual({ type: 'git', url: `${URL}/` })
  })

  test('a root naming another repository is refused, and nothing is written', () => {
    edit('package.json', (m) => { m.repository = { type: 'git', url: 'git+https://github.com/other/fork.git' } })
    const before = snapshot()
    const out = run('stamp', URL)
    expect([out.status, out.problems.length]).toEqual([1, 1])
    expect(snapshot()).toEqual(before)
  })

  test('a missing LICENSE, a missing platform package or a malformed URL is refused, writing nothing', () => {
    edit('package.json', (m) => { delete m.repository })
    const cases: Array<[() => void, string]> = [
      [() => fs.rmSync(path.join(dir, 'LICENSE')), URL],
      [() => fs.rmSync(path.join(dir, 'npm', 'darwin-x64'), { recursive: true }), URL],
      [() => undefined, 'github.com/example-org/session-awareness'],
      [() => undefined, `${URL}/extra`],
      [() => undefined, ''],
    ]
    for (const [prepare, url] of cases) {
      prepare()
      const before = snapshot()
      const out = run('stamp', url)
      expect([url, out.status, out.problems.length]).toEqual([url, 1, 1])
      expect(snapshot()).toEqual(before)
      fs.writeFileSync(path.join(dir, 'LICENSE'), LICENSE_TEXT)
    }
  })
})

test('an unknown command or a missing argument is a usage error', () => {
  for (const args of [[], ['check'], ['stamp'], ['publish', 'v1.0.0']]) {
    const out = run(...args)
    expect([out.status, out.problems.length]).toEqual([1, 1])
  }
})

test("CHANGELOG.md matches the package's version: released under its own heading, or named by Unreleased", () => {
  const changelog = fs.readFileSync(path.join(ROOT, 'CHANGELOG.md'), 'utf8')
  const released = [...changelog.matchAll(/^## (\d+\.\d+\.\d+\S*) - \d{4}-\d{2}-\d{2}$/gm)].map((m) => m[1])
  const unreleased = /^## Unreleased\n\n([^#]*)/m.exec(changelog)?.[1] ?? ''
  // The version is either released (its own dated heading, the newest one) or still being
  // prepared (Unreleased names it), never both.
  if (released.includes(VERSION)) {
    expect(released[0]).toBe(VERSION)
    expect(unreleased).not.toContain(`Version ${VERSION}`)
  } else {
    expect(unreleased).toContain(`Version ${VERSION}`)
  }
})
