// A gateway process for the several-process tests (semantics.md#processes): a child running
// __test__/fixtures/gateway.js on a shared file, driven over IPC. Each test file extends it with
// what it collects from the child's messages (wakes, entered notices, records).
import { ChildProcess, fork } from 'node:child_process'
import { join } from 'node:path'

const FIXTURE = join(__dirname, 'fixtures', 'gateway.js')

/** The child's answer to one call. */
export type Reply = { type: 'reply'; id: number; result?: unknown; error?: { code: string; message: string } }

/** A message from the child: a reply, `ready`, or what a test file collects. */
export type GatewayMessage = Reply | { type: 'ready' } | { type: string; [key: string]: unknown }

/** Every gateway started and not yet stopped: `stopAll` ends them after each test. */
const running: GatewayProcess[] = []

export class GatewayProcess {
  private nextId = 1
  private readonly waiting = new Map<number, (r: Reply) => void>()
  private readonly exited: Promise<void>

  protected constructor(private readonly child: ChildProcess) {
    this.exited = new Promise((resolve) => child.once('exit', () => resolve()))
    child.on('message', (m: GatewayMessage) => {
      if (m.type === 'reply') {
        const r = m as Reply
        this.waiting.get(r.id)?.(r)
        this.waiting.delete(r.id)
      } else {
        this.onMessage(m)
      }
    })
  }

  /** What the child sends besides replies; nothing by default. */
  protected onMessage(_m: GatewayMessage): void {}

  /** Forks the fixture on `file` with the store `options`, made by `make`; resolves once it is ready. */
  protected static async fork<G extends GatewayProcess>(
    make: (child: ChildProcess) => G,
    file: string,
    options: Record<string, unknown>,
  ): Promise<G> {
    const child = fork(FIXTURE, [file, JSON.stringify(options)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
    const g = make(child)
    await new Promise<void>((resolve, reject) => {
      child.once('error', reject)
      child.on('message', (m: GatewayMessage) => {
        if (m.type === 'ready') resolve()
      })
    })
    running.push(g)
    return g
  }

  /** Runs `cmd` in the child; rejects with the child's error (and its `code`). */
  call<R>(cmd: string, args: Record<string, unknown> = {}): Promise<R> {
    const id = this.nextId++
    return new Promise<R>((resolve, reject) => {
      this.waiting.set(id, (r) => (r.error ? reject(Object.assign(new Error(r.error.message), r.error)) : resolve(r.result as R)))
      this.child.send({ id, cmd, args })
    })
  }

  /** SIGKILL, as a crash. */
  async kill(): Promise<void> {
    this.child.kill('SIGKILL')
    await this.exited
  }

  /** Ends the child (its store closes as the process exits); idempotent. */
  async stop(): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) {
      this.child.disconnect()
      await this.exited
    }
  }

  /** Stops every gateway started so far. */
  static async stopAll(): Promise<void> {
    await Promise.all(running.splice(0).map((g) => g.stop()))
  }
}

/** Polls `read` until `ok` holds (60 s at most), and returns the value that held. */
export async function until<V>(read: () => Promise<V> | V, ok: (v: V) => boolean, what: string): Promise<V> {
  const deadline = Date.now() + 60_000
  for (;;) {
    const v = await read()
    if (ok(v)) return v
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(v)}`)
    await new Promise((r) => setTimeout(r, 10))
  }
}
