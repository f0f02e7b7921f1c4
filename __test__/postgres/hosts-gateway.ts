// A gateway process on a host of scripts/pg/hosts.js: __test__/fixtures/pg-gateway.js started
// in the host's network namespace on the server's URL as that host reaches it, driven over IPC.
import type { ChildProcess } from 'node:child_process'
import * as path from 'node:path'

import type { Hosts } from '../../scripts/pg/hosts'

const FIXTURE = path.join(__dirname, '..', 'fixtures', 'pg-gateway.js')
const ROOT = path.join(__dirname, '..', '..')

type Reply = { type: 'reply'; id: number; result?: unknown; error?: { code: string; message: string } }
type Message = Reply | { type: string; [key: string]: unknown }

/** A notice as the gateway's onNotice heard it, with when (ms since the epoch). */
export interface Heard {
  watcher: string
  target: string
  changesSince: number
  at: number
}

export class HostGateway {
  private nextId = 1
  private readonly waiting = new Map<number, (r: Reply) => void>()
  private readonly exited: Promise<void>
  /** Every wake request, with when it arrived. */
  readonly wakes: { req: { sessionKey: string; reason: string }; at: number }[] = []
  /** Every notice that entered the queue. */
  readonly heard: Heard[] = []
  /** The codes of every onError report. */
  readonly errors: string[] = []

  private constructor(private readonly child: ChildProcess) {
    this.exited = new Promise((resolve) => child.once('exit', () => resolve()))
    child.on('message', (m: Message) => {
      if (m.type === 'reply') {
        const r = m as Reply
        this.waiting.get(r.id)?.(r)
        this.waiting.delete(r.id)
      } else if (m.type === 'wake') {
        this.wakes.push({ req: m.req as { sessionKey: string; reason: string }, at: m.at as number })
      } else if (m.type === 'notice') {
        const n = m.notice as { watcherKey: string; targetKey: string; changesSince: number }
        this.heard.push({ watcher: n.watcherKey, target: n.targetKey, changesSince: n.changesSince, at: m.at as number })
      } else if (m.type === 'error') {
        this.errors.push(m.code as string)
      }
    })
  }

  /** Starts a gateway on host `i` with the store `options`; resolves once its store is open. */
  static async start(hosts: Hosts, i: number, options: Record<string, unknown> = {}): Promise<HostGateway> {
    const child = hosts.spawn(i, process.execPath, [FIXTURE, hosts.url(i), JSON.stringify(options)], {
      cwd: ROOT,
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    })
    const g = new HostGateway(child)
    await new Promise<void>((resolve, reject) => {
      child.once('error', reject)
      child.once('exit', (code) => reject(new Error(`the gateway on host ${i} exited with ${code}`)))
      child.on('message', (m: Message) => {
        if (m.type === 'ready') resolve()
        if (m.type === 'failed') reject(new Error(`the gateway on host ${i} failed: ${m.code} ${m.message}`))
      })
    })
    return g
  }

  /** Runs `cmd` in the gateway; rejects with its error (and `code`). */
  call<R>(cmd: string, args: Record<string, unknown> = {}): Promise<R> {
    const id = this.nextId++
    return new Promise<R>((resolve, reject) => {
      this.waiting.set(id, (r) =>
        r.error ? reject(Object.assign(new Error(r.error.message), r.error)) : resolve(r.result as R),
      )
      this.child.send({ id, cmd, args })
    })
  }

  /** SIGKILL, as a crash of the host's gateway. */
  async kill(): Promise<void> {
    this.child.kill('SIGKILL')
    await this.exited
  }

  /** Closes the store and ends the process; idempotent. */
  async stop(): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) {
      this.child.disconnect()
      await this.exited
    }
  }
}
