// OpenClaw's published dist/ with its session-state chunk swapped (scripts/openclaw/swap.mjs),
// driven through OpenClaw's own callers: the `sessions_send` tool with `watch`, the reply path's
// drain (`drainFormattedSystemEvents`: decode `session-state:` context keys, acknowledge), the
// `session_status` tool with `changesSince`. The same scenario runs twice, each in its own
// process and state directory: with OpenClaw's original chunk and with the served module. Each
// run asserts exact values; then the two runs' observations must be identical.
//
//   node24 scripts/openclaw-swap.mjs                   original vs adapter (pass-through until
//                                                      dist/ has session-awareness/openclaw)
//   node24 scripts/openclaw-swap.mjs --impl passthrough   the comparison against a pass-through
//   node24 scripts/openclaw-swap.mjs --run <impl> [--phase scenario|write|sweep] [--state DIR]
//                                                      one run; prints its observations as JSON
//
// Then, with the adapter, the migration of docs/openclaw.md: OpenClaw writes a pending notice;
// on that state directory OpenClaw's own first sweep, and (files restored, `session-awareness
// import` run) the adapter's, must observe the same.
//
// No model provider and no network: the gateway the tools call is a stand-in that answers
// `sessions.resolve` from OpenClaw's own session store and accepts `agent` runs.

import { execFileSync } from 'node:child_process'
import { isDeepStrictEqual } from 'node:util'
import { cpSync, existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = resolve(fileURLToPath(new URL('.', import.meta.url)), '..')
const args = process.argv.slice(2)
const flag = (name) => {
  const i = args.indexOf(name)
  return i >= 0 ? args[i + 1] : undefined
}

/** Whether the built package has the adapter subpath (dist/ from `npm run build`). */
function adapterUrl() {
  try {
    return import.meta.resolve('session-awareness/openclaw')
  } catch {
    return undefined
  }
}

if (flag('--run')) {
  const impl = flag('--run')
  const phase = flag('--phase') ?? 'scenario'
  const given = flag('--state')
  const stateDir = given ?? mkdtempSync(join(tmpdir(), `openclaw-swap-${impl}-`))
  try {
    const o = { impl, stateDir, root, adapterUrl: adapterUrl() }
    const run =
      phase === 'scenario'
        ? (await import('./openclaw/swap-scenario.mjs')).runScenario
        : (await import('./openclaw/swap-migrate.mjs'))[phase === 'write' ? 'writeHistory' : 'firstSweep']
    process.stdout.write(`${JSON.stringify(await run(o))}\n`)
  } finally {
    if (!given) rmSync(stateDir, { recursive: true, force: true })
  }
  // OpenClaw's background work (its reply flow's timers) would keep the process alive.
  process.exit(0)
}

const swapped = flag('--impl') ?? (adapterUrl() ? 'adapter' : 'passthrough')
let passed = 0
let failed = 0
const check = (name, ok, detail) => {
  if (ok) passed += 1
  else failed += 1
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${name}${ok || detail === undefined ? '' : `\n     ${detail}`}`)
}

/** Runs one phase in its own process and reports its checks; returns its output. */
function phase(label, impl, extra = []) {
  const started = Date.now()
  let out
  try {
    const stdout = execFileSync(process.execPath, [fileURLToPath(import.meta.url), '--run', impl, ...extra], {
      cwd: root,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
      maxBuffer: 64 << 20,
    })
    out = JSON.parse(stdout.trim().split('\n').at(-1))
  } catch (error) {
    check(`${label}: the run completes`, false, String(error.message ?? error).split('\n')[0])
    return undefined
  }
  console.log(`== ${label} (${Date.now() - started} ms; OpenClaw's chunks loaded in ${out.loadMs} ms)`)
  for (const c of out.checks) check(`${label}: ${c.name}`, c.ok, c.detail)
  return out
}

/** Every observation of two runs must be equal. */
function compare(label, a, b) {
  if (!a || !b) return
  for (const step of Object.keys(a.observed)) {
    check(`${label}: same observations, ${step}`, isDeepStrictEqual(a.observed[step], b.observed[step]),
      `original ${JSON.stringify(a.observed[step])}\n     ${swapped} ${JSON.stringify(b.observed[step])}`)
  }
  check(`${label}: same steps observed`, isDeepStrictEqual(Object.keys(a.observed), Object.keys(b.observed)))
}

// The scenario, with each implementation.
compare('scenario', phase('scenario, original', 'original'), phase(`scenario, ${swapped}`, swapped))

// The migration: history written by OpenClaw, then its first sweep by OpenClaw and, on the same
// files restored and imported, by the adapter.
if (swapped === 'adapter') {
  const dir = mkdtempSync(join(tmpdir(), 'openclaw-swap-migrate-'))
  const stateDir = join(dir, 'state-dir')
  const saved = join(dir, 'saved')
  try {
    phase('migration, history (original)', 'original', ['--phase', 'write', '--state', stateDir])
    // Cursors hold the watcher's store path: the sweeps run on the same directory, restored.
    cpSync(stateDir, saved, { recursive: true })
    const original = phase('migration, first sweep (original)', 'original', ['--phase', 'sweep', '--state', stateDir])
    rmSync(stateDir, { recursive: true })
    cpSync(saved, stateDir, { recursive: true })
    const summary = JSON.parse(
      execFileSync(process.execPath, [join(root, 'bin/session-awareness.js'), 'import', '--json', '--',
        join(stateDir, 'state/openclaw.sqlite'), join(stateDir, 'state/session-state.sqlite')], { encoding: 'utf8' }),
    )
    check('migration: session-awareness import copies 1 event, 1 head, 1 cursor',
      isDeepStrictEqual(['events', 'heads', 'cursors'].map((t) => summary[t].inserted), [1, 1, 1]), JSON.stringify(summary))
    const adapter = phase('migration, first sweep (adapter)', 'adapter', ['--phase', 'sweep', '--state', stateDir])
    compare('migration', original, adapter)
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
} else {
  console.log('migration: not run (it needs the adapter: npm run build)')
}
if (!existsSync(join(root, '.tmp/openclaw/package/dist'))) console.log('run `npm run openclaw:setup` first')
console.log(`${passed} passed, ${failed} failed`)
process.exit(failed === 0 ? 0 : 1)
