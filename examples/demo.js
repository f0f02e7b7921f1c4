// A small gateway scenario on the store's own SQLite file under ./demo-data (a gateway's
// <stateDir>/state/session-state.sqlite, never its own database): a parent spawns a
// child, a human types straight into the child, the parent is woken, drains one notice and
// reconciles with changesSince before it acts.
'use strict'
const fs = require('node:fs')
const path = require('node:path')
const { SessionState } = require('..')

const dir = path.join(process.cwd(), 'demo-data', 'state')
fs.mkdirSync(dir, { recursive: true })
const file = path.join(dir, 'session-state.sqlite')
for (const f of [file, `${file}-wal`, `${file}-shm`]) fs.rmSync(f, { force: true })

const parent = 'agent:main:main'
const child = 'agent:main:subagent:research'

let woken
const wokenOnce = new Promise((resolve) => (woken = resolve))
const state = new SessionState(file, {
  wakeCoalesceMs: 50,
  wake: (req) => woken(req),
  onError: (err) => console.error(`onError ${err.code}: ${err.message}`),
})

const show = (label, value) => console.log(`${label} ${JSON.stringify(value)}`)

async function main() {
  console.log(`database: ${path.relative(process.cwd(), file)}`)
  show('recorded', state.record({
    sessionKey: child, kind: 'child_spawned', actorType: 'agent', actorId: parent,
    summary: 'research child spawned', watchers: [parent], runId: 'run-1',
  }))
  show('recorded', state.record({
    sessionKey: child, kind: 'human_direct_message', actorType: 'human',
    summary: 'human message via telegram', payload: { channel: 'telegram' },
  }))
  show('recorded', state.record({
    sessionKey: child, kind: 'run_completed', actorType: 'agent', actorId: child,
    summary: 'run finished', runId: 'run-1',
  }))

  // The wake callback never keeps the process alive by itself (a gateway has its own
  // server handles); this small script holds the loop open until the wake arrives.
  const keepAlive = setTimeout(() => {}, 5000)
  const wake = await wokenOnce
  clearTimeout(keepAlive)
  show('woken', wake)
  const notices = state.drain(parent)
  console.log(`drained ${notices.length} notice(s):`)
  for (const n of notices) console.log(`  ${n.text}`)
  const delta = state.changesSince(child, notices[0].changesSince)
  console.log('changesSince:')
  console.log(JSON.stringify(delta, null, 2))
  // The turn has read the child up to the last event returned: a notice the drain reopened for
  // those events is withdrawn with its wake (one notice and one wake per burst).
  const last = delta.stateChanges.events.at(-1)
  if (last) show('acknowledged through', state.acknowledge(parent, [child], { through: last.sequence }))
  show('stateVersions', state.stateVersions([{ sessionKey: child }, { sessionKey: parent }]))
  show('drain again', state.drain(parent))

  // An adopted session: a Claude Code transcript on local disk that a person may type into
  // directly. The gateway adopts it, watches it, and the upstream monitor notices the human.
  const transcript = path.join(dir, 'adopted.jsonl')
  const line = (type, role, content) => JSON.stringify({ type, message: { role, content } }) + '\n'
  fs.writeFileSync(transcript, line('user', 'user', 'earlier history'))
  const adopted = 'agent:main:claude-import'
  show('adopted', state.adopt(adopted, { source: 'claude', transcriptPath: transcript }))
  state.watch(parent, adopted)
  state.noteOwnUserMessage(adopted, 'Please summarise the build log.')
  fs.appendFileSync(transcript, line('user', 'user', 'Please summarise the build log.'))
  fs.appendFileSync(transcript, line('assistant', 'assistant', 'Here is the summary.'))
  fs.appendFileSync(transcript, line('user', 'user', 'Actually, stop and wait for me.'))
  show('upstream scan recorded', state.scanUpstream())
  for (const n of state.drain(parent)) console.log(`  ${n.text}`)
  state.close()
}

main().catch((e) => {
  console.error(e)
  process.exitCode = 1
})
