/**
 * OpenClaw's session-key rules, as the adapter's default host services: which keys name an
 * agent's session, whose agent a key belongs to, which keys are nested (sub-agent) sessions,
 * an agent's main key and a session's kind. Written from the behaviour of OpenClaw 2026.9.6.
 * @packageDocumentation
 */

/** An agent-qualified key split into its agent and the rest. */
export interface ParsedAgentSessionKey {
  /** The agent id as written in the key (trimmed, not yet normalised). */
  agentId: string
  /** Everything after the agent id's colon, byte for byte. */
  rest: string
}

/** The agent that owns a key without one of its own. */
export const DEFAULT_AGENT_ID = 'main'

const CANONICAL_AGENT_ID = /^[a-z0-9][a-z0-9_-]{0,63}$/i

/**
 * Splits `agent:<agentId>:<rest>` (the prefix in any case). Null unless the agent id is
 * non-empty after trimming and the rest is non-empty and does not begin with a colon.
 */
export function parseAgentSessionKey(sessionKey: string): ParsedAgentSessionKey | null {
  if (typeof sessionKey !== 'string' || sessionKey.slice(0, 6).toLowerCase() !== 'agent:') return null
  const colon = sessionKey.indexOf(':', 6)
  if (colon === -1) return null
  const agentId = sessionKey.slice(6, colon).trim()
  const rest = sessionKey.slice(colon + 1)
  if (agentId === '' || rest === '' || rest.startsWith(':')) return null
  return { agentId, rest }
}

/**
 * The canonical form of an agent id: lowercase, characters outside `[a-z0-9_-]` turned into
 * dashes, no leading or trailing dash, at most 64 characters; `main` when nothing is left.
 */
export function normalizeAgentId(value: string | null | undefined): string {
  const trimmed = (value ?? '').trim()
  const lower = trimmed.toLowerCase()
  if (CANONICAL_AGENT_ID.test(trimmed)) return lower
  const cleaned = lower
    .replace(/[^a-z0-9_-]+/g, '-')
    .replace(/^-+/, '')
    .replace(/-+$/, '')
    .slice(0, 64)
  return cleaned === '' ? DEFAULT_AGENT_ID : cleaned
}

/**
 * The agent of a key: its own (normalised) when the key is agent-qualified, else the
 * configured default. Throws for a key that begins with `agent:` but does not parse, and for
 * a bare key without a configured default.
 */
export function resolveAgentIdFromSessionKey(sessionKey: string, configuredDefaultAgentId?: string): string {
  const parsed = parseAgentSessionKey(sessionKey)
  if (parsed) return normalizeAgentId(parsed.agentId)
  if ((sessionKey ?? '').trim().toLowerCase().startsWith('agent:')) {
    throw new Error('malformed agent session key: no agent can be resolved from it')
  }
  const fallback = configuredDefaultAgentId?.trim()
  if (fallback) return normalizeAgentId(fallback)
  throw new Error('session key names no agent and no default agent was given')
}

/** True for a nested (sub-agent) session: the key, or its rest, begins with `subagent:` in any case. */
export function isSubagentSessionKey(sessionKey: string | null | undefined): boolean {
  const raw = (sessionKey ?? '').trim()
  if (raw === '') return false
  if (raw.toLowerCase().startsWith('subagent:')) return true
  return parseAgentSessionKey(raw)?.rest.toLowerCase().startsWith('subagent:') === true
}

/** `agent:<normalised agent id>:<main key, lowercased; main when empty>`. */
export function buildAgentMainSessionKey(params: { agentId: string; mainKey?: string | null }): string {
  const mainKey = (params.mainKey ?? '').trim().toLowerCase() || 'main'
  return `agent:${normalizeAgentId(params.agentId)}:${mainKey}`
}

/** What a session is, for deciding whether its agent's main session watches it. */
export type SessionKind = 'global' | 'unknown' | 'cron' | 'spawn-child' | 'group' | 'direct'

/** The parts of a session entry the kind depends on. */
export interface SessionKindEntry {
  /** The session that spawned this one. */
  spawnedBy?: string | null
  /** The chat the session belongs to (`group` and `channel` are group chats). */
  chatType?: string | null
}

/**
 * The kind of a session: `global` and `unknown` by key, `cron` for a key whose rest begins
 * with `cron:`, `spawn-child` for an entry with `spawnedBy`, `group` for a group or channel
 * chat (by entry, or a key containing `:group:` or `:channel:`), else `direct`.
 */
export function classifySessionKind(sessionKey: string, entry?: SessionKindEntry | null): SessionKind {
  if (sessionKey === 'global') return 'global'
  if (sessionKey === 'unknown') return 'unknown'
  if (parseAgentSessionKey(sessionKey)?.rest.toLowerCase().startsWith('cron:')) return 'cron'
  if (entry?.spawnedBy) return 'spawn-child'
  if (entry?.chatType === 'group' || entry?.chatType === 'channel') return 'group'
  if (sessionKey.includes(':group:') || sessionKey.includes(':channel:')) return 'group'
  return 'direct'
}
