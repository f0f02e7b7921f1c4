#!/usr/bin/env node
// A local dry run of the release, read from the workflows themselves so that it cannot drift
// from them: from clean clones of HEAD it runs ci.yml's lint job, one Linux test cell
// (x86_64-unknown-linux-gnu under this Node) and release.yml's publish job, with the real
// linux-x64-gnu binary that `npm run build` placed in npm/linux-x64-gnu/ and a stand-in file
// for every other target, up to `napi prepublish --dry-run` and `npm publish --dry-run` of
// every package, whose tarballs' file lists it then checks exactly.
//
//   node scripts/release-dry-run.mjs        (npm run test:release; npm test runs it)
//
// Each job gets its own clone, as each runner gets its own checkout: a step that leans on
// what another job built (dist/, a binary) fails here as it would there. What needs GitHub
// is replaced and said so on its line: actions/checkout is the clone, actions/setup-node
// and actions/cache are this machine's Node and caches, actions/download-artifact copies the
// binaries, `npm ci` hard-links this checkout's node_modules (installed by `npm ci` from the
// same lockfile: no network, and no rebuild of better-sqlite3), cargo shares this checkout's
// target/, the PostgreSQL step finds this machine's server binaries and installs nothing
// (without them it fails: npm test needs them anyway), and the publish loop asks no registry
// whether a version exists (none is) and publishes with --dry-run and without --provenance
// (no OIDC token here). What a step writes to $GITHUB_ENV is in the environment of the job's
// later steps, as on a runner. Jest runs the suites that load the package through dist/ and
// child processes, and the PostgreSQL harness's on the binaries that step named (npm test
// runs them all; RELEASE_DRY_RUN_JEST=all runs the whole suite here too). A step whose text
// or shape this script does not know makes it fail rather than guess.
import { execFileSync, spawnSync } from 'node:child_process'
import * as fs from 'node:fs'
import { createRequire } from 'node:module'
import * as path from 'node:path'
import { fileURLToPath } from 'node:url'

const require = createRequire(import.meta.url)
const yaml = require('js-yaml')

const ROOT = path.join(path.dirname(fileURLToPath(import.meta.url)), '..')
const WORK = path.join(ROOT, '.tmp', 'release-dry-run')
const JEST_SUITES = ['__test__/errors.test.ts', '__test__/multiprocess.test.ts', '__test__/postgres/cluster.test.ts']
// The PostgreSQL step's install lines: this run installs nothing, it needs the binaries here.
const PG_INSTALL = ['sudo apt-get update', 'sudo apt-get install -y --no-install-recommends postgresql']
const STEP_TIMEOUT_MS = 600_000
const load = (name) => yaml.load(fs.readFileSync(path.join(ROOT, '.github', 'workflows', name), 'utf8'))
const ci = load('ci.yml')
const release = load('release.yml')
const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'))
const { parseTriple } = require('@napi-rs/cli')
const HEAD = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).trim()
const REAL_ABI = 'linux-x64-gnu'
const REAL_BINARY = path.join(ROOT, 'npm', REAL_ABI, `${pkg.napi.binaryName}.${REAL_ABI}.node`)
// The repository the stamp step is told it runs in (GITHUB_SERVER_URL/GITHUB_REPOSITORY): the
// one package.json names, as on the real repository's runner (the step refuses any other).
const GITHUB = (() => {
  const { repository } = JSON.parse(fs.readFileSync(new URL('../package.json', import.meta.url), 'utf8'))
  const m = /^(?:git\+)?(https:\/\/github\.com)\/([^/]+\/[^/.]+)(?:\.git)?$/.exec(repository?.url ?? '')
  if (!m) throw new Error(`release-dry-run: package.json's repository is not a GitHub URL: ${repository?.url}`)
  return { GITHUB_SERVER_URL: m[1], GITHUB_REPOSITORY: m[2] }
})()

const log = (line) => console.log(`release-dry-run: ${line}`)
const fail = (why) => {
  throw new Error(why)
}

/** A clean clone of HEAD for one job: the checkout step. */
function checkout(job) {
  const dir = path.join(WORK, job)
  execFileSync('git', ['clone', '--quiet', '--no-checkout', ROOT, dir], { stdio: 'inherit' })
  execFileSync('git', ['checkout', '--quiet', HEAD], { cwd: dir, stdio: 'inherit' })
  return dir
}

/** `npm ci`: this checkout's node_modules, hard-linked (copied across file systems). */
function install(dir) {
  try {
    execFileSync('cp', ['-al', path.join(ROOT, 'node_modules'), path.join(dir, 'node_modules')])
  } catch {
    fs.rmSync(path.join(dir, 'node_modules'), { recursive: true, force: true })
    execFileSync('cp', ['-a', path.join(ROOT, 'node_modules'), path.join(dir, 'node_modules')])
  }
}

/** `${{ ... }}` of a step's text, from the matrix cell and the few contexts used; else fail. */
function expand(text, matrix) {
  return text.replace(/\$\{\{\s*([^}]+?)\s*\}\}/g, (whole, expr) => {
    const m = /^matrix\.([\w.]+)$/.exec(expr)
    if (m) {
      const value = m[1].split('.').reduce((o, k) => (o == null ? undefined : o[k]), matrix)
      if (typeof value !== 'string') fail(`${whole}: no such matrix value in this cell`)
      return value
    }
    if (expr === 'secrets.NPM_TOKEN') return ''
    return fail(`${whole}: an expression the dry run cannot evaluate`)
  })
}

/** Whether a step's `if:` holds in this cell; only the conditions the workflows use. */
function holds(condition, matrix, dir) {
  if (condition === undefined) return true
  const c = String(condition).replace(/^\$\{\{\s*|\s*\}\}$/g, '').trim()
  if (c === "hashFiles('eslint.config.js', 'eslint.config.mjs', 'eslint.config.cjs') != ''") {
    return ['eslint.config.js', 'eslint.config.mjs', 'eslint.config.cjs'].some((f) => fs.existsSync(path.join(dir, f)))
  }
  // This machine is the runner: a Linux one, as the cells the dry run stands in for.
  if (c === "runner.os == 'Linux'") return process.platform === 'linux'
  if (c === '!matrix.alpine') return !matrix.alpine
  if (c === 'matrix.alpine') return Boolean(matrix.alpine)
  const ends = /^endsWith\(matrix\.(\w+), '([^']+)'\)$/.exec(c)
  if (ends) return String(matrix[ends[1]]).endsWith(ends[2])
  return fail(`if: ${condition}: a condition the dry run cannot evaluate`)
}

/** Runs one step's shell text in `dir` as a GitHub Linux runner would (bash -eo pipefail). */
function shell(dir, text, env) {
  const started = Date.now()
  const out = spawnSync('bash', ['--noprofile', '--norc', '-eo', 'pipefail', '-c', text], {
    cwd: dir,
    stdio: 'inherit',
    env,
    timeout: STEP_TIMEOUT_MS,
  })
  if (out.status !== 0) fail(`step failed (exit ${out.status ?? out.signal ?? out.error}):\n${text}`)
  return ((Date.now() - started) / 1000).toFixed(1)
}

/**
 * The environment of a step: workflow and job `env`, what earlier steps wrote to $GITHUB_ENV
 * (`exported`), step `env`, the runner's CI variables.
 */
function stepEnv(workflow, job, step, matrix, exported = {}) {
  const env = { ...process.env, CI: 'true', GITHUB_ACTIONS: 'true', GITHUB_REF_NAME: `v${pkg.version}`, ...GITHUB }
  for (const scope of [workflow.env, job.env]) {
    for (const [k, v] of Object.entries(scope ?? {})) env[k] = expand(String(v), matrix)
  }
  Object.assign(env, exported)
  for (const [k, v] of Object.entries(step.env ?? {})) env[k] = expand(String(v), matrix)
  env.CARGO_TARGET_DIR = path.join(ROOT, 'target')
  delete env.NAPI_RS_NATIVE_LIBRARY_PATH
  delete env.NODE_OPTIONS
  return env
}

/** The NAME=value lines of a $GITHUB_ENV file (the NAME<<EOF form is not used: fail on it). */
function readGithubEnv(file) {
  const vars = {}
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    if (line === '') continue
    const m = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/.exec(line)
    if (!m) fail(`$GITHUB_ENV line the dry run cannot read: ${line}`)
    vars[m[1]] = m[2]
  }
  return vars
}

/**
 * The PostgreSQL step (ci.yml: binaries from pg_config, else apt-get install): run as it is,
 * with the install lines made to fail instead, so it only passes on the binaries found here.
 */
function postgresStep(text) {
  if (!text.includes(PG_INSTALL[1])) return [text, '']
  let t = once(text, PG_INSTALL[0],
    'echo "release-dry-run: no PostgreSQL server binaries here, and this run installs nothing" >&2; exit 1')
  t = once(t, PG_INSTALL[1], ':')
  return [t, 'installs nothing: the server binaries of this machine']
}

/**
 * Runs a job's steps in a fresh clone. `actions` answers each `uses:` step (or a string:
 * why it is skipped), `rewrite` may change a `run:` text (returning [text, note]).
 */
function runJob(label, workflow, job, matrix, actions, rewrite = (t) => [t, '']) {
  log(`== ${label}`)
  const dir = checkout(label.replace(/[^\w-]+/g, '-'))
  const githubEnv = path.join(WORK, `${path.basename(dir)}.env`)
  fs.writeFileSync(githubEnv, '')
  let exported = {}
  for (const step of job.steps) {
    const name = step.name ?? step.uses ?? step.run.split('\n')[0]
    if (!holds(step.if, matrix, dir)) {
      log(`  - ${name}: not in this cell (if: ${step.if})`)
      continue
    }
    if (step.uses) {
      const action = step.uses.replace(/@.*$/, '')
      if (!(action in actions)) fail(`${step.uses}: an action the dry run does not know`)
      const answer = actions[action]
      if (typeof answer === 'string') log(`  - ${name}: ${answer}`)
      else log(`  ✓ ${name}: ${answer(dir, step, matrix)}`)
      continue
    }
    let text = expand(step.run, matrix)
    if (text.trim() === 'npm ci') {
      install(dir)
      log(`  ✓ ${name}: node_modules hard-linked from this checkout's npm ci (same lockfile)`)
      continue
    }
    const [pgText, pgNote] = postgresStep(text)
    const [rewritten, jobNote] = rewrite(pgText, step)
    text = rewritten
    const seconds = shell(dir, text, { ...stepEnv(workflow, job, step, matrix, exported), GITHUB_ENV: githubEnv })
    const now = readGithubEnv(githubEnv)
    const added = Object.entries(now).filter(([k, v]) => exported[k] !== v).map(([k, v]) => `${k}=${v}`)
    exported = now
    const notes = [pgNote, jobNote, ...(added.length ? [`GITHUB_ENV ${added.join(' ')}`] : [])].filter(Boolean)
    log(`  ✓ ${name} (${seconds} s)${notes.length ? `: ${notes.join('; ')}` : ''}`)
  }
  return dir
}

const skipSetupNode = `skipped: this machine's Node ${process.version}`
const cloned = () => `clean clone of ${HEAD.slice(0, 12)}`

/** Replaces `from` in `text` exactly once, so a changed workflow stops the dry run. */
function once(text, from, to) {
  const n = text.split(from).length - 1
  if (n !== 1) fail(`expected one ${JSON.stringify(from)} in the step, found ${n}:\n${text}`)
  return text.replace(from, to)
}

/** The expected file list of the root tarball: lib/ compiled, the loader, CLI and docs. */
function rootFiles(dir) {
  const dist = []
  for (const sub of ['', 'openclaw/']) {
    for (const f of fs.readdirSync(path.join(dir, 'lib', sub))) {
      const m = /^(.*)\.(ts|mts)$/.exec(f)
      if (!m || f.endsWith('.d.ts')) continue
      dist.push(...(m[2] === 'ts' ? [`dist/${sub}${m[1]}.js`, `dist/${sub}${m[1]}.d.ts`] : [`dist/${sub}${m[1]}.mjs`, `dist/${sub}${m[1]}.d.mts`]))
    }
  }
  // The documents the README links ship too (package.json `files`), so its links work in node_modules.
  const docs = fs.readdirSync(path.join(dir, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)
  const shipped = ['BENCHMARKS.md', 'RELIABILITY.md', 'examples/gateway.ts', ...docs]
  return ['CHANGELOG.md', 'LICENSE', 'README.md', 'bin/session-awareness.js', 'index.d.ts', 'index.js', 'package.json', ...shipped, ...dist].sort()
}

function main() {
  if (!fs.existsSync(REAL_BINARY)) fail(`${path.relative(ROOT, REAL_BINARY)} is missing: run npm run build first`)
  const dirty = execFileSync('git', ['status', '--porcelain', '--untracked-files=no'], { cwd: ROOT, encoding: 'utf8' })
  if (dirty) log(`note: uncommitted changes are not in the clones (HEAD ${HEAD.slice(0, 12)} is)`)
  fs.rmSync(WORK, { recursive: true, force: true })
  fs.mkdirSync(WORK, { recursive: true })
  const started = Date.now()

  // ci.yml, lint.
  runJob('ci-lint', ci, ci.jobs.lint, {}, {
    'actions/checkout': cloned,
    'actions/setup-node': skipSetupNode,
  })

  // ci.yml, test: the x86_64 Linux cell under this Node's major version.
  const cell = {
    platform: ci.jobs.test.strategy.matrix.platform.find((p) => p.target === 'x86_64-unknown-linux-gnu') ?? fail('no x86_64 Linux test cell'),
    node: String(process.versions.node.split('.')[0]),
  }
  if (!ci.jobs.test.strategy.matrix.node.includes(cell.node)) fail(`the test matrix has no Node ${cell.node}`)
  runJob(`ci-test-${cell.platform.target}-node${cell.node}`, ci, ci.jobs.test, cell, {
    'actions/checkout': cloned,
    'actions/setup-node': skipSetupNode,
    'actions/download-artifact': (dir, step, matrix) => {
      const w = step.with
      const expected = { name: `bindings-${matrix.platform.target}`, path: '.' }
      if (expand(w.name, matrix) !== expected.name || w.path !== '.') fail(`download-artifact with ${JSON.stringify(w)}`)
      // The build job uploads npm/<abi>/<binary>; a one-file artifact lands at `path` itself.
      fs.copyFileSync(REAL_BINARY, path.join(dir, path.basename(REAL_BINARY)))
      return `${expected.name}: the binary npm run build made here`
    },
  }, (text) => {
    if (text.trim() !== 'npx jest --runInBand' || process.env.RELEASE_DRY_RUN_JEST === 'all') return [text, '']
    return [`${text.trim()} ${JEST_SUITES.join(' ')}`, `narrowed to ${JEST_SUITES.join(', ')} (npm test runs the whole suite)`]
  })

  // release.yml, publish.
  const placeholders = []
  const publishOut = path.join(WORK, 'publish-json')
  fs.mkdirSync(publishOut)
  const publishDir = runJob('release-publish', release, release.jobs.publish, {}, {
    'actions/checkout': cloned,
    'actions/setup-node': `${skipSetupNode} (no registry-url: nothing is published)`,
    'actions/download-artifact': (dir, step) => {
      if (step.with.pattern !== 'bindings-*') fail(`download-artifact with ${JSON.stringify(step.with)}`)
      for (const target of pkg.napi.targets) {
        const abi = parseTriple(target).platformArchABI
        const into = path.join(dir, step.with.path, `bindings-${target}`)
        fs.mkdirSync(into, { recursive: true })
        const file = path.join(into, `${pkg.napi.binaryName}.${abi}.node`)
        if (abi === REAL_ABI) fs.copyFileSync(REAL_BINARY, file)
        else {
          fs.writeFileSync(file, `stand-in for the ${target} binary\n`)
          placeholders.push(abi)
        }
      }
      return `${pkg.napi.targets.length} artifacts: ${REAL_ABI} real, ${placeholders.join(', ')} stand-ins`
    },
  }, (text, step) => {
    if (!/\bnpm publish\b/.test(text)) return [text, '']
    let t = once(text, 'npm view "$name@$version" version 2>/dev/null', ': "$name@$version"')
    t = once(t, 'npm publish "$dir" --provenance --access public --tag "$tag"',
      `npm publish "$dir" --dry-run --json --access public --tag "$tag" > "${publishOut}/$name.json"`)
    if (step.env?.NODE_AUTH_TOKEN === undefined) fail('the publish step no longer sets NODE_AUTH_TOKEN')
    return [t, 'npm publish --dry-run --json, without --provenance, no registry lookup']
  })

  // Every package's tarball, exactly.
  const lists = {}
  const expected = { [pkg.name]: rootFiles(publishDir) }
  for (const target of pkg.napi.targets) {
    const abi = parseTriple(target).platformArchABI
    expected[`${pkg.name}-${abi}`] = ['LICENSE', 'README.md', `${pkg.napi.binaryName}.${abi}.node`, 'package.json'].sort()
  }
  const problems = []
  const published = fs.readdirSync(publishOut).map((f) => f.replace(/\.json$/, '')).sort()
  if (JSON.stringify(published) !== JSON.stringify(Object.keys(expected).sort())) {
    problems.push(`published ${published.join(', ')}; want ${Object.keys(expected).sort().join(', ')}`)
  }
  for (const name of published) {
    const text = fs.readFileSync(path.join(publishOut, `${name}.json`), 'utf8')
    const info = JSON.parse(text.slice(text.indexOf('{')))
    const entry = info[name] ?? info
    lists[name] = entry.files.map((f) => f.path).sort()
    if (entry.version !== pkg.version) problems.push(`${name} would be published at ${entry.version}`)
    if (JSON.stringify(lists[name]) !== JSON.stringify(expected[name])) {
      problems.push(`${name} ships ${JSON.stringify(lists[name])}; want ${JSON.stringify(expected[name])}`)
    }
  }
  fs.writeFileSync(path.join(ROOT, '.tmp', 'release-dry-run.json'), `${JSON.stringify({ head: HEAD, tarballs: lists }, null, 2)}\n`)
  for (const [name, files] of Object.entries(lists)) log(`${name}@${pkg.version}: ${files.join(' ')}`)
  if (problems.length > 0) fail(problems.join('\n'))
  log(`ok: ${published.length} tarballs as expected, ${((Date.now() - started) / 1000).toFixed(0)} s`)
}

try {
  main()
} catch (err) {
  console.error(`release-dry-run: ${err.message}`)
  process.exitCode = 1
} finally {
  // The clones hold package.json files and tests of their own: none may outlive the run
  // (RELEASE_DRY_RUN_KEEP=1 keeps them to look into a failure).
  if (process.env.RELEASE_DRY_RUN_KEEP !== '1') fs.rmSync(WORK, { recursive: true, force: true })
}
