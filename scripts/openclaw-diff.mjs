// The differential test: seeded random sequences of calls to OpenClaw 2026.9.6's
// session-state API, run against OpenClaw's published module and against the adapter
// (session-awareness/openclaw), each in its own worker thread with its own state directory.
// After every step it compares the return value, every watcher's queued notices (text,
// context key, store path) and every cursor row; at the end of a sequence, every session's
// events. Prints the first failing sequence's seed, index and step, and a final
// `N passed, N failed` line.
//
//   node scripts/openclaw-diff.mjs [--sequences N] [--seed S] [--only I] [--verbose]
//
// Needs Node 24 (OpenClaw's node:sqlite), `npm run openclaw:setup` and `npm run build`.

import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fork } from 'node:child_process'
import { sequence } from './openclaw/diff-gen.mjs'
import { compareStep } from './openclaw/diff-compare.mjs'

const args = process.argv.slice(2)
const arg = (name, fallback) => {
  const i = args.indexOf(name)
  return i === -1 ? fallback : args[i + 1]
}
const count = Number(arg('--sequences', 2000))
const seed = Number(arg('--seed', 20261130))
const only = arg('--only', undefined)
const verbose = args.includes('--verbose')
const maxFailures = Number(arg('--max-failures', 5))

const DAY = 86_400_000
// Each sequence starts 100 days after the previous one's start, so both sides prune behind
// its first record (more than an hour since their last prune) and nothing carries over.
const START = Date.UTC(2027, 0, 1)
const startOf = (i) => START + i * 100 * DAY

function startSide(side) {
  // A memory file system where there is one: OpenClaw's writes each take a lock directory
  // and re-apply file modes, which costs a disk several times what the test itself does.
  const base = existsSync('/dev/shm') ? '/dev/shm' : tmpdir()
  const stateDir = mkdtempSync(join(base, `oc-diff-${side}-`))
  const child = fork(new URL('./openclaw/diff-side.mjs', import.meta.url), {
    env: { ...process.env, OPENCLAW_STATE_DIR: stateDir, OC_DIFF_SIDE: side },
    serialization: 'advanced',
    stdio: ['ignore', verbose ? 'inherit' : 'ignore', verbose ? 'inherit' : 'ignore', 'ipc'],
  })
  const waiting = []
  child.on('message', (m) => {
    const r = waiting.shift()
    if (r) r(m)
  })
  child.on('exit', (code) => {
    if (waiting.length) {
      console.error(`${side} side exited (${code}) during a run`)
      process.exit(2)
    }
  })
  const ask = (msg) =>
    new Promise((res) => {
      waiting.push(res)
      if (msg) child.send(msg)
    })
  return { side, stateDir, child, ask, ready: ask(null) }
}

const t0 = performance.now()
const oc = startSide('openclaw')
const ad = startSide('adapter')
await Promise.all([oc.ready, ad.ready])
const tReady = performance.now()

let passed = 0
let failed = 0
const indices = only !== undefined ? [Number(only)] : Array.from({ length: count }, (_, i) => i)
for (const i of indices) {
  const ops = sequence(seed, i, startOf(i))
  const [a, b] = await Promise.all([oc.ask({ type: 'run', ops }), ad.ask({ type: 'run', ops })])
  if (verbose) console.log(i, JSON.stringify(a.ms), JSON.stringify(b.ms))
  let failure = null
  for (let s = 0; s < ops.length && !failure; s++) {
    const d = compareStep(ops[s], a.steps[s], b.steps[s])
    if (d) failure = { step: s, ...d }
  }
  if (!failure && a.final !== b.final) failure = { step: 'final', part: 'events', openclaw: a.final, adapter: b.final }
  if (failure) {
    failed++
    if (failed <= maxFailures) {
      console.log(`FAIL seed ${seed} sequence ${i} step ${failure.step} (${failure.part}); reproduce: --seed ${seed} --only ${i}`)
      const upto = failure.step === 'final' ? ops.length : failure.step + 1
      for (let s = 0; s < upto; s++) console.log(`  ${s}: ${JSON.stringify(ops[s])}`)
      console.log(`  openclaw: ${failure.openclaw}`)
      console.log(`  adapter:  ${failure.adapter}`)
    }
  } else {
    passed++
  }
}
const t1 = performance.now()
await Promise.all([oc.ask({ type: 'close' }), ad.ask({ type: 'close' })])
for (const s of [oc, ad]) s.child.kill()
for (const s of [oc, ad]) rmSync(s.stateDir, { recursive: true, force: true })
console.log(
  `openclaw-diff: seed ${seed}, ${indices.length} sequences in ${((t1 - tReady) / 1000).toFixed(1)} s (start-up ${((tReady - t0) / 1000).toFixed(1)} s)`,
)
console.log(`${passed} passed, ${failed} failed`)
process.exit(failed === 0 ? 0 : 1)
