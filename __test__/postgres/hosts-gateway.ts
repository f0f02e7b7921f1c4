// A gateway process on a host of scripts/pg/hosts.js: __test__/fixtures/pg-gateway.js started
// in the host's network namespace on the server's URL as that host reaches it, driven over IPC
// as every gateway process of the tests is (__test__/gateway-process.ts).
import * as path from 'node:path'

import type { Hosts } from '../../scripts/pg/hosts'
import { GatewayProcess, type GatewayMessage } from '../gateway-process'

const FIXTURE = path.join(__dirname, '..', 'fixtures', 'pg-gateway.js')
const ROOT = path.join(__dirname, '..', '..')

/** A notice as the gateway's onNotice heard it, with when (ms since the epoch). */
export interface Heard {
  watcher: string
  target: string
  changesSince: number
  at: number
}

export class HostGateway extends GatewayProcess {
  /** Every wake request, with when it arrived. */
  readonly wakes: { req: { sessionKey: string; reason: string }; at: number }[] = []
  /** Every notice that entered the queue. */
  readonly heard: Heard[] = []
  /** The codes of every onError report. */
  readonly errors: string[] = []
  /** What each onError report says failed (`SessionStateError.during`), in order. */
  readonly during: (string | undefined)[] = []
  /** Every batch of the gateway's followers (semantics.md#follow), with when it arrived. */
  readonly batches: { batch: { stateVersion: number; events: { sequence: number }[]; historyGap: boolean }; at: number }[] = []

  protected override onMessage(m: GatewayMessage): void {
    if (m.type === 'wake') {
      this.wakes.push({ req: m.req as { sessionKey: string; reason: string }, at: m.at as number })
    } else if (m.type === 'notice') {
      const n = m.notice as { watcherKey: string; targetKey: string; changesSince: number }
      this.heard.push({ watcher: n.watcherKey, target: n.targetKey, changesSince: n.changesSince, at: m.at as number })
    } else if (m.type === 'batch') {
      this.batches.push({ batch: m.batch as HostGateway['batches'][number]['batch'], at: m.at as number })
    } else if (m.type === 'error') {
      this.errors.push(m.code as string)
      this.during.push(m.during as string | undefined)
    }
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
      child.on('message', (m: GatewayMessage) => {
        if (m.type === 'ready') resolve()
        if (m.type === 'failed') reject(new Error(`the gateway on host ${i} failed: ${m.code} ${m.message}`))
      })
    })
    return g
  }
}
