// One benchmark process for OpenClaw's published implementation, under Node 24:
// `node24 bench/openclaw/child.mjs`. Driven by bench/run.js over IPC like bench/child.js, with
// workloads named as in bench/workloads.js: `setup` builds one's fixtures, `round` returns one
// timed sample, `exit` cleans up.

import { mkdirSync, mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { exitRemoving, openOpenClaw } from './api.mjs'
import { WORKLOADS } from './workloads.mjs'

const dir = mkdtempSync(join(tmpdir(), 'session-awareness-bench-openclaw-'))
const stateDir = join(dir, 'state-dir')
mkdirSync(stateDir, { mode: 0o700 })
// Loading OpenClaw takes seconds; requests wait for it.
const loading = openOpenClaw(stateDir)
let oc
const byName = new Map(WORKLOADS.map((w) => [w.name, w]))
const contexts = new Map()

async function handle(msg) {
  oc ??= await loading
  switch (msg.cmd) {
    case 'names':
      return { workloads: WORKLOADS.map((w) => ({ name: w.name, rounds: w.rounds ?? null })), version: oc.version }
    case 'setup': {
      const ctx = { dir, oc }
      contexts.set(msg.name, ctx)
      await byName.get(msg.name).setup(ctx)
      return {}
    }
    case 'round':
      return { ns: await byName.get(msg.name).round(contexts.get(msg.name)) }
    default:
      throw new Error(`unknown command ${msg.cmd}`)
  }
}

process.on('message', (msg) => {
  if (msg.cmd === 'exit') {
    oc?.db.closeOpenClawStateDatabase()
    // OpenClaw's wake timers would keep the process alive.
    exitRemoving(dir)
  }
  handle(msg).then(
    (reply) => process.send({ ok: true, ...reply }),
    (err) => process.send({ ok: false, error: String(err && err.stack) }),
  )
})
