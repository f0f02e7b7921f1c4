// Several hosts on one machine, for the tests of gateways on several hosts: a network
// namespace for the PostgreSQL server and one per gateway, each gateway joined to the
// server's namespace by a veth pair of its own (10.77.<i>.2 on the gateway's side, 10.77.<i>.1
// on the server's). A gateway's link can be cut, restored or slowed, and a process started on
// a host reaches the server only over its link. The test process itself stays in its own
// namespace and reaches the server through its Unix socket (`cluster.url`).
//
// Needs root (network namespaces); the server still runs as `postgres` (scripts/pg/cluster.js).
// Everything is removed by `stop()`, and by a watchdog if the process that started the hosts
// ends first (even by kill -9).
'use strict'
const childProcess = require('node:child_process')
const { randomBytes } = require('node:crypto')

const { startCluster } = require('./cluster')

// Deletes the namespaces once the process that made them ends. $1: its pid, then the names.
const WATCHDOG = `
pid="$1"; shift
while kill -0 "$pid" 2>/dev/null; do sleep 1; done
for ns in "$@"; do ip netns pids "$ns" 2>/dev/null | xargs -r kill -KILL 2>/dev/null; ip netns del "$ns" 2>/dev/null; done
`

function ip(...args) {
  const r = childProcess.spawnSync('ip', args, { encoding: 'utf8' })
  if (r.status !== 0) throw new Error(`ip ${args.join(' ')} failed: ${(r.stderr || r.stdout).trim()}`)
  return r.stdout
}

function tc(ns, ...args) {
  const r = childProcess.spawnSync('ip', ['netns', 'exec', ns, 'tc', ...args], { encoding: 'utf8' })
  if (r.status !== 0) throw new Error(`tc ${args.join(' ')} failed: ${(r.stderr || r.stdout).trim()}`)
}

/** True when network namespaces can be made here (root on Linux with `ip`). */
function canMakeHosts() {
  if (process.platform !== 'linux' || process.getuid?.() !== 0) return false
  return childProcess.spawnSync('ip', ['netns', 'list']).status === 0
}

/**
 * Starts a PostgreSQL server in a namespace of its own and `gateways` gateway namespaces
 * joined to it. Resolves to the hosts; see scripts/pg/hosts.d.ts.
 */
async function startHosts({ gateways = 2, name = 'hosts', durable = false } = {}) {
  if (!canMakeHosts()) throw new Error('several hosts need root and `ip netns` (Linux)')
  const id = randomBytes(2).toString('hex')
  const db = `sa-${id}-db`
  const hosts = Array.from({ length: gateways }, (_, k) => ({
    ns: `sa-${id}-g${k + 1}`,
    // Interface names: at most 15 bytes.
    dbSide: `sa${id}d${k + 1}`,
    gwSide: `sa${id}g${k + 1}`,
    server: `10.77.${k + 1}.1`,
    address: `10.77.${k + 1}.2`,
  }))
  const names = [db, ...hosts.map((h) => h.ns)]
  const dog = childProcess.spawn('sh', ['-c', WATCHDOG, 'sa-hosts-watchdog', String(process.pid), ...names], {
    detached: true,
    stdio: 'ignore',
  })
  dog.unref()
  const removeAll = () => {
    for (const ns of names) {
      const pids = childProcess.spawnSync('ip', ['netns', 'pids', ns], { encoding: 'utf8' }).stdout || ''
      for (const pid of pids.split('\n').filter(Boolean)) {
        try {
          process.kill(Number(pid), 'SIGKILL')
        } catch {
          // already gone
        }
      }
      childProcess.spawnSync('ip', ['netns', 'del', ns])
    }
  }
  let cluster = null
  try {
    for (const ns of names) {
      ip('netns', 'add', ns)
      ip('-n', ns, 'link', 'set', 'lo', 'up')
    }
    for (const h of hosts) {
      ip('link', 'add', h.dbSide, 'type', 'veth', 'peer', 'name', h.gwSide)
      ip('link', 'set', h.dbSide, 'netns', db)
      ip('link', 'set', h.gwSide, 'netns', h.ns)
      ip('-n', db, 'addr', 'add', `${h.server}/30`, 'dev', h.dbSide)
      ip('-n', h.ns, 'addr', 'add', `${h.address}/30`, 'dev', h.gwSide)
      ip('-n', db, 'link', 'set', h.dbSide, 'up')
      ip('-n', h.ns, 'link', 'set', h.gwSide, 'up')
    }
    cluster = await startCluster({
      name,
      durable,
      netns: db,
      addresses: hosts.map((h) => h.server),
      clients: hosts.map((h) => `${h.address}/32`),
    })
  } catch (e) {
    removeAll()
    throw e
  }
  const host = (i) => {
    const h = hosts[i - 1]
    if (!h) throw new Error(`no gateway host ${i} (there are ${hosts.length})`)
    return h
  }
  let stopped = false
  return {
    cluster,
    gateways: hosts.length,
    /** The server's URL as gateway host `i` (1-based) reaches it. */
    url(i) {
      return cluster.urlAt(host(i).server)
    },
    /** The namespace of gateway host `i`. */
    netns(i) {
      return host(i).ns
    },
    /** Starts `command` with `args` on gateway host `i`; `options` as for child_process.spawn. */
    spawn(i, command, args = [], options = {}) {
      return childProcess.spawn('ip', ['netns', 'exec', host(i).ns, command, ...args], options)
    },
    /** Cuts gateway host `i`'s link: its packets go nowhere until `restore(i)`. */
    cut(i) {
      ip('-n', db, 'link', 'set', host(i).dbSide, 'down')
      ip('-n', host(i).ns, 'link', 'set', host(i).gwSide, 'down')
    },
    /** Restores gateway host `i`'s link. */
    restore(i) {
      const h = host(i)
      ip('-n', db, 'link', 'set', h.dbSide, 'up')
      ip('-n', h.ns, 'link', 'set', h.gwSide, 'up')
      // A veth that comes back up keeps its address; the route comes back with it.
    },
    /** Delays every packet on gateway host `i`'s link by `ms` each way (0 removes the delay). */
    delay(i, ms) {
      const h = host(i)
      for (const [ns, dev] of [
        [db, h.dbSide],
        [h.ns, h.gwSide],
      ]) {
        if (ms > 0) tc(ns, 'qdisc', 'replace', 'dev', dev, 'root', 'netem', 'delay', `${ms}ms`)
        else childProcess.spawnSync('ip', ['netns', 'exec', ns, 'tc', 'qdisc', 'del', 'dev', dev, 'root'])
      }
    },
    /** Stops the server, ends every process left on the hosts and removes the namespaces. */
    async stop() {
      if (stopped) return
      stopped = true
      try {
        await cluster.stop()
      } finally {
        removeAll()
        try {
          process.kill(-dog.pid, 'SIGKILL')
        } catch {
          // already gone
        }
      }
    },
  }
}

module.exports = { startHosts, canMakeHosts }
