// The several-hosts harness of scripts/pg/hosts.js: the server in a network namespace of its
// own, two gateway hosts that reach it only over their own links, a link that can be cut and
// restored, and nothing left behind by stop().
import * as childProcess from 'node:child_process'
import * as fs from 'node:fs'
import * as path from 'node:path'

import { canMakeHosts, startHosts, type Hosts } from '../../scripts/pg/hosts'

const ROOT = path.join(__dirname, '..', '..')

// What a gateway host sees: the client address the server reports for a connection from
// there, or the error code of the attempt (connect timeout 1.5 s).
const PROBE = `
const { Client } = require('pg')
const c = new Client({ connectionString: process.argv[1], connectionTimeoutMillis: 1500 })
c.connect()
  .then(() => c.query('SELECT host(inet_client_addr()) AS a, host(inet_server_addr()) AS s'))
  .then((r) => { console.log(JSON.stringify(r.rows[0])); return c.end() })
  .catch((e) => { console.log(JSON.stringify({ error: e.code || e.message })); process.exit(0) })
`

function probe(h: Hosts, i: number, url: string): Promise<Record<string, string>> {
  return new Promise((resolve, reject) => {
    const p = h.spawn(i, process.execPath, ['-e', PROBE, url], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] })
    let out = ''
    p.stdout?.on('data', (d: Buffer) => (out += d.toString()))
    p.on('error', reject)
    p.on('exit', () => {
      try {
        resolve(JSON.parse(out.trim()))
      } catch {
        reject(new Error(`probe printed ${JSON.stringify(out)}`))
      }
    })
  })
}

/** True when `pid` has exited (gone, or a zombie nobody reaped yet). */
function gone(pid: number): boolean {
  if (!fs.existsSync(`/proc/${pid}`)) return true
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
  return stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z')
}

const namespaces = (): string[] =>
  childProcess
    .execFileSync('ip', ['netns', 'list'], { encoding: 'utf8' })
    .split('\n')
    .map((l) => l.split(' ')[0])
    .filter(Boolean)

test('this machine can make hosts (root and ip netns): the tests of several hosts never skip here', () => {
  expect(canMakeHosts()).toBe(true)
})

describe('two gateway hosts and a server host', () => {
  let hosts: Hosts
  beforeAll(async () => {
    hosts = await startHosts({ name: 'hosts-test' })
  }, 90000)
  afterAll(async () => {
    await hosts?.stop()
  }, 60000)

  test('each gateway reaches the server over its own link; the test process through the socket', async () => {
    expect(hosts.url(1)).toBe('postgresql://postgres@10.77.1.1:5432/postgres')
    expect(await probe(hosts, 1, hosts.url(1))).toEqual({ a: '10.77.1.2', s: '10.77.1.1' })
    expect(await probe(hosts, 2, hosts.url(2))).toEqual({ a: '10.77.2.2', s: '10.77.2.1' })
    // Each host's own loopback has no server on it, and a host has no route to the other link.
    expect(await probe(hosts, 1, 'postgresql://postgres@127.0.0.1:5432/postgres')).toEqual({ error: 'ECONNREFUSED' })
    expect((await probe(hosts, 1, hosts.url(2))).error).toBeDefined()
    const rows = await hosts.cluster.sql<{ listen: string }>("SELECT current_setting('listen_addresses') AS listen")
    expect(rows).toEqual([{ listen: '127.0.0.1,10.77.1.1,10.77.2.1' }])
  }, 60000)

  test('a cut link reaches nothing until it is restored; the other host is unaffected', async () => {
    hosts.cut(1)
    try {
      expect((await probe(hosts, 1, hosts.url(1))).error).toBeDefined()
      expect(await probe(hosts, 2, hosts.url(2))).toEqual({ a: '10.77.2.2', s: '10.77.2.1' })
    } finally {
      hosts.restore(1)
    }
    expect(await probe(hosts, 1, hosts.url(1))).toEqual({ a: '10.77.1.2', s: '10.77.1.1' })
  }, 60000)

  test('stop() ends the server and removes every namespace', async () => {
    const mine = [hosts.netns(1), hosts.netns(2)]
    const pid = hosts.cluster.pid
    const dataDir = hosts.cluster.dataDir
    expect(namespaces()).toEqual(expect.arrayContaining(mine))
    await hosts.stop()
    expect(namespaces().filter((n) => n.startsWith(mine[0].slice(0, 7)))).toEqual([])
    expect(gone(pid)).toBe(true)
    expect(fs.existsSync(dataDir)).toBe(false)
  }, 60000)
})
