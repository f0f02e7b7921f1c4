import type { ChildProcess, SpawnOptions } from 'node:child_process'

import type { Cluster } from './cluster'

/** What {@link startHosts} resolves to: a server host and gateway hosts, joined by links. */
export interface Hosts {
  /** The server, in a namespace of its own; its `url` is its Unix socket (reached from the test process). */
  readonly cluster: Cluster
  /** How many gateway hosts there are (numbered from 1). */
  readonly gateways: number
  /** The server's URL as gateway host `i` reaches it (over its link). */
  url(i: number): string
  /** The network namespace of gateway host `i`. */
  netns(i: number): string
  /** Starts `command` on gateway host `i`. */
  spawn(i: number, command: string, args?: string[], options?: SpawnOptions): ChildProcess
  /** Cuts gateway host `i`'s link until {@link restore}. */
  cut(i: number): void
  /** Restores gateway host `i`'s link. */
  restore(i: number): void
  /** Delays every packet on gateway host `i`'s link by `ms` each way; 0 removes the delay. */
  delay(i: number, ms: number): void
  /** Stops the server, ends what runs on the hosts and removes the namespaces. Safe to call twice. */
  stop(): Promise<void>
}

/** Starts a PostgreSQL server in a network namespace and `gateways` (default 2) gateway namespaces joined to it. Needs root. */
export function startHosts(options?: { gateways?: number; name?: string; durable?: boolean }): Promise<Hosts>
/** True when network namespaces can be made here (root on Linux with `ip netns`). */
export function canMakeHosts(): boolean
