// A throwaway PgBouncer in front of a test cluster (scripts/pg/cluster.js): a generated ini in
// a fresh temp dir, listening on 127.0.0.1 and a free port, in session, transaction or
// statement mode; stopped by its pid, and by a watchdog if the process that started it ends
// first. `pgbouncer` must be on the PATH or in /usr/sbin (Debian: `apt-get install
// pgbouncer`; scripts/test.sh installs it as root when it is missing).
//
// PgBouncer refuses to run as root: under root it runs as the `postgres` user, like the
// cluster's server. Authentication is `trust` for the users the ini lists (`postgres`).
'use strict'
const childProcess = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { freePort, alive, sleep, accepts } = require('./proc')

/** The line a machine without PgBouncer gets. */
const PGBOUNCER_HINT = 'PgBouncer not found: install it, e.g. `apt-get install pgbouncer`'

const isRoot = () => typeof process.getuid === 'function' && process.getuid() === 0

/** The pgbouncer program; throws the install hint when there is none. */
function pgbouncerBin() {
  for (const dir of [...(process.env.PATH || '').split(':'), '/usr/sbin', '/usr/local/sbin']) {
    const file = path.join(dir || '.', 'pgbouncer')
    if (dir && fs.existsSync(file)) return file
  }
  throw Object.assign(new Error(PGBOUNCER_HINT), { code: 'ERR_PGBOUNCER_NOT_INSTALLED' })
}

// The watchdog: waits for the starting process to end, then kills PgBouncer by its pidfile
// and removes the dir. $1: the pid to wait for, $2: the dir.
const WATCHDOG = `
while kill -0 "$1" 2>/dev/null; do sleep 1; done
p=$(cat "$2/pgbouncer.pid" 2>/dev/null)
[ -n "$p" ] && kill -KILL "$p" 2>/dev/null
rm -rf "$2"
`


/**
 * Starts PgBouncer in front of `cluster` (the cluster's server on 127.0.0.1 and its port) in
 * `mode` (`session`, `transaction` or `statement`), with `poolSize` server connections per
 * database and user. Resolves once it accepts connections, to `{ url, port, mode, stop() }`:
 * `url` is the cluster's superuser URL through the pooler.
 */
async function startPgBouncer(cluster, { mode = 'session', poolSize = 20 } = {}) {
  const bin = pgbouncerBin()
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `sa-pgbouncer-${mode}-`))
  if (isRoot()) {
    const uid = Number(childProcess.execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }))
    const gid = Number(childProcess.execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }))
    fs.chownSync(dir, uid, gid)
  }
  const dog = childProcess.spawn('sh', ['-c', WATCHDOG, 'sa-pgbouncer-watchdog', String(process.pid), dir], {
    detached: true,
    stdio: 'ignore',
  })
  dog.unref()
  const state = { pid: 0, stopped: false }
  const stop = async () => {
    if (state.stopped) return
    state.stopped = true
    if (state.pid && alive(state.pid)) {
      process.kill(state.pid, 'SIGINT')
      for (let i = 0; i < 200 && alive(state.pid); i++) await sleep(25)
      if (alive(state.pid)) process.kill(state.pid, 'SIGKILL')
    }
    try {
      process.kill(-dog.pid, 'SIGKILL')
    } catch {
      // already gone
    }
    fs.rmSync(dir, { recursive: true, force: true })
  }
  let last = ''
  for (let attempt = 0; attempt < 3; attempt++) {
    const port = await freePort()
    const ini = path.join(dir, 'pgbouncer.ini')
    fs.writeFileSync(path.join(dir, 'userlist.txt'), '"postgres" ""\n')
    fs.writeFileSync(
      ini,
      [
        '[databases]',
        `* = host=127.0.0.1 port=${cluster.port}`,
        '[pgbouncer]',
        'listen_addr = 127.0.0.1',
        `listen_port = ${port}`,
        "unix_socket_dir = ''",
        'auth_type = trust',
        `auth_file = ${path.join(dir, 'userlist.txt')}`,
        `pool_mode = ${mode}`,
        `default_pool_size = ${poolSize}`,
        'max_client_conn = 500',
        // The `pg` client of the tests sends it; PgBouncer 1.18 passes on only the parameters it knows.
        'ignore_startup_parameters = extra_float_digits',
        `logfile = ${path.join(dir, 'pgbouncer.log')}`,
        `pidfile = ${path.join(dir, 'pgbouncer.pid')}`,
        '',
      ].join('\n'),
    )
    const [file, argv] = isRoot() ? ['runuser', ['-u', 'postgres', '--', bin, '-d', ini]] : [bin, ['-d', ini]]
    const r = childProcess.spawnSync(file, argv, { encoding: 'utf8', cwd: '/' })
    if (r.status !== 0) {
      last = `pgbouncer failed (${r.status ?? r.signal}): ${(r.stderr || r.stdout || '').trim()}`
      continue
    }
    for (let i = 0; i < 400; i++) {
      if (!state.pid) {
        try {
          state.pid = Number(fs.readFileSync(path.join(dir, 'pgbouncer.pid'), 'utf8').trim())
        } catch {
          // not written yet
        }
      }
      if (state.pid && (await accepts(port))) {
        return {
          url: `postgresql://postgres@127.0.0.1:${port}/postgres`,
          port,
          mode,
          get pid() {
            return state.pid
          },
          stop,
        }
      }
      if (state.pid && !alive(state.pid)) break
      await sleep(25)
    }
    let log = ''
    try {
      log = fs.readFileSync(path.join(dir, 'pgbouncer.log'), 'utf8').trim().split('\n').slice(-3).join(' | ')
    } catch {
      // no log
    }
    last = `pgbouncer did not start on port ${port}: ${log}`
    if (state.pid && alive(state.pid)) process.kill(state.pid, 'SIGKILL')
    state.pid = 0
  }
  await stop()
  throw new Error(last)
}

module.exports = { startPgBouncer, pgbouncerBin, PGBOUNCER_HINT }
