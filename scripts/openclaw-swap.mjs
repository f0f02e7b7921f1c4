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
//   node24 scripts/openclaw-swap.mjs --run <impl>      one run; prints its observations as JSON
//
// No model provider and no network: the gateway the tools call is a stand-in that answers
// `sessions.resolve` from OpenClaw's own session store and accepts `agent` runs.

import { execFileSync } from 'node:child_process'
import { isDeepStrictEqual } from 'node:util'
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
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
  const { runScenario } = await import('./openclaw/swap-scenario.mjs')
  const impl = flag('--run')
  const stateDir = mkdtempSync(join(tmpdir(), `openclaw-swap-${impl}-`))
  try {
    const out = await runScenario({ impl, stateDir, root, adapterUrl: adapterUrl() })
    process.stdout.write(`${JSON.stringify(out)}\n`)
  } finally {
    rmSync(stateDir, { recursive: true, force: true })
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

const runs = {}
for (const impl of ['original', swapped]) {
  const started = Date.now()
  let out
  try {
    const stdout = execFileSync(process.execPath, [fileURLToPath(import.meta.url), '--run', impl], {
      cwd: root,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
      maxBuffer: 64 << 20,
    })
    out = JSON.parse(stdout.trim().split('\n').at(-1))
  } catch (error) {
    check(`${impl}: the run completes`, false, String(error.message ?? error).split('\n')[0])
    continue
  }
  console.log(`== ${impl} (${Date.now() - started} ms; OpenClaw's chunks loaded in ${out.loadMs} ms)`)
  for (const c of out.checks) check(`${impl}: ${c.name}`, c.ok, c.detail)
  runs[impl] = out
}
if (runs.original && runs[swapped]) {
  const a = runs.original.observed
  const b = runs[swapped].observed
  for (const step of Object.keys(a)) {
    check(`same observations, ${step}`, isDeepStrictEqual(a[step], b[step]),
      `original ${JSON.stringify(a[step])}\n     ${swapped} ${JSON.stringify(b[step])}`)
  }
  check('same steps observed', isDeepStrictEqual(Object.keys(a), Object.keys(b)))
}
if (!existsSync(join(root, '.tmp/openclaw/package/dist'))) console.log('run `npm run openclaw:setup` first')
console.log(`${passed} passed, ${failed} failed`)
process.exit(failed === 0 ? 0 : 1)
