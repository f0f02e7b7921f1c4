// Notices across processes (semantics.md#processes): what the cross-process poll costs and how fast it delivers.
//
//   node bench/multiprocess.js            # both parts (about 60 s + 40 s)
//   IDLE_SECONDS=10 NOTICES=200 node bench/multiprocess.js   # a shorter run
//   IDLE_SYNC_MS=1000 SYNC_MS=20 node bench/multiprocess.js  # other poll intervals
//
// 1. Idle cost: two processes with the poll (syncIntervalMs IDLE_SYNC_MS, default 100) share one idle
//    database file for IDLE_SECONDS; two more with the poll off (syncIntervalMs 0) share
//    another. Each reports process.cpuUsage() (user + system, every thread) over the window.
// 2. Delivery latency: process A records NOTICES events, each opening a notice for a watcher
//    that process B serves, one every GAP_MS. B drains in its wake callback (wakeCoalesceMs
//    0) and measures, per notice, the time from just before A's record to the drain in B.
'use strict'
const { fork } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const W = 'agent:main:main'
const IDLE_SECONDS = Number(process.env.IDLE_SECONDS || 60)
const NOTICES = Number(process.env.NOTICES || 1000)
const GAP_MS = Number(process.env.GAP_MS || 37)
const SYNC_MS = Number(process.env.SYNC_MS || 100)
const IDLE_SYNC_MS = Number(process.env.IDLE_SYNC_MS || 100)

const now = () => performance.timeOrigin + performance.now()

function loadAddon() {
  return require('..').SessionState
}

// ---- child roles ---------------------------------------------------------------------------

function idleRole(file, syncIntervalMs) {
  const SessionState = loadAddon()
  const state = new SessionState(file, { syncIntervalMs, wake: () => {} })
  state.peek(W) // serve one watcher, as a gateway would after its first turn
  setTimeout(() => {
    const start = process.cpuUsage()
    const t0 = now()
    setTimeout(() => {
      const used = process.cpuUsage(start)
      state.close()
      process.send({ cpuUs: used.user + used.system, wallMs: now() - t0 })
    }, IDLE_SECONDS * 1000)
  }, 1000)
}

function receiverRole(file) {
  const SessionState = loadAddon()
  const latencies = []
  let state
  let done = false
  const onWake = () => {
    if (done) return
    for (const n of state.drain(W)) {
      const at = now()
      const e = state.changesSince(n.targetKey, n.changesSince).stateChanges.events[0]
      latencies.push(at - e.payload.sentAt)
    }
    if (latencies.length >= NOTICES) {
      done = true
      state.close()
      process.send({ latencies })
    }
  }
  state = new SessionState(file, { syncIntervalMs: SYNC_MS, wakeCoalesceMs: 0, serveWatchers: [W], wake: onWake })
  process.send({ ready: true })
  setInterval(() => {}, 1 << 30) // a gateway has its own handles; this script holds the loop
}

function recorderRole(file) {
  const SessionState = loadAddon()
  const state = new SessionState(file, { syncIntervalMs: SYNC_MS })
  let i = 0
  const step = () => {
    if (i >= NOTICES) {
      state.close()
      process.send({ done: true })
      return
    }
    state.record({
      sessionKey: `agent:main:subagent:n${i}`, kind: 'human_direct_message', actorType: 'human',
      summary: 'human message via telegram', watchers: [W], payload: { sentAt: now() },
    })
    i += 1
    setTimeout(step, GAP_MS)
  }
  step()
}

// ---- parent --------------------------------------------------------------------------------

function spawn(role, ...args) {
  const child = fork(__filename, [role, ...args.map(String)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
  const messages = []
  const waiters = []
  child.on('message', (m) => {
    messages.push(m)
    waiters.splice(0).forEach((w) => w())
  })
  const next = (pred) =>
    new Promise((resolve) => {
      const check = () => {
        const m = messages.find(pred)
        if (m) resolve(m)
        else waiters.push(check)
      }
      check()
    })
  return { child, next }
}

function stats(values) {
  const s = [...values].sort((a, b) => a - b)
  const q = (p) => s[Math.min(s.length - 1, Math.floor(p * s.length))]
  return { count: s.length, median: q(0.5), p95: q(0.95), p99: q(0.99), worst: s[s.length - 1], best: s[0] }
}

async function main() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sa-bench-mp-'))
  const info = `${os.cpus().length} × ${os.cpus()[0].model}, Node ${process.version}, ${os.platform()} ${os.release()}`
  console.log(`machine: ${info}`)

  console.log(`\n# idle cost: ${IDLE_SECONDS} s, two processes per file`)
  const onFile = path.join(dir, 'idle-on.sqlite')
  const offFile = path.join(dir, 'idle-off.sqlite')
  // Create the files first so the four processes do not race on the schema.
  const SessionState = loadAddon()
  for (const f of [onFile, offFile]) new SessionState(f, { syncIntervalMs: 0 }).close()
  const idle = [
    [`poll ${IDLE_SYNC_MS} ms`, spawn('idle', onFile, IDLE_SYNC_MS)],
    [`poll ${IDLE_SYNC_MS} ms`, spawn('idle', onFile, IDLE_SYNC_MS)],
    ['poll off', spawn('idle', offFile, 0)],
    ['poll off', spawn('idle', offFile, 0)],
  ]
  const idleResults = await Promise.all(idle.map(([, c]) => c.next((m) => 'cpuUs' in m)))
  idle.forEach(([label], i) => {
    const { cpuUs, wallMs } = idleResults[i]
    const ms = cpuUs / 1000
    console.log(`${label}: ${ms.toFixed(1)} ms CPU in ${(wallMs / 1000).toFixed(1)} s = ${((100 * ms) / wallMs).toFixed(3)} % of one core`)
  })

  console.log(`\n# delivery latency: ${NOTICES} notices, one every ${GAP_MS} ms, syncIntervalMs ${SYNC_MS}`)
  const latFile = path.join(dir, 'latency.sqlite')
  new SessionState(latFile, { syncIntervalMs: 0 }).close()
  const receiver = spawn('receiver', latFile)
  await receiver.next((m) => m.ready)
  const t0 = now()
  const recorder = spawn('recorder', latFile)
  await recorder.next((m) => m.done)
  const { latencies } = await receiver.next((m) => m.latencies)
  const s = stats(latencies)
  console.log(`wall ${((now() - t0) / 1000).toFixed(1)} s`)
  console.log(
    `record in A -> drained in B: median ${s.median.toFixed(1)} ms, p95 ${s.p95.toFixed(1)} ms, ` +
      `p99 ${s.p99.toFixed(1)} ms, worst ${s.worst.toFixed(1)} ms, best ${s.best.toFixed(1)} ms (n = ${s.count})`,
  )
  for (const c of [receiver, recorder, ...idle.map(([, c]) => c)]) c.child.kill()
  fs.rmSync(dir, { recursive: true, force: true })
}

const [role, ...args] = process.argv.slice(2)
if (role === 'idle') idleRole(args[0], Number(args[1]))
else if (role === 'receiver') receiverRole(args[0])
else if (role === 'recorder') recorderRole(args[0])
else main().catch((e) => {
  console.error(e)
  process.exit(1)
})
