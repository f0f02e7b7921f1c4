// Loads functions of OpenClaw's published implementation (the npm package `openclaw`,
// unpacked by scripts/openclaw.sh) by their real names.
//
// The bundler names chunks `<name>-<hash>.mjs` and exports minified letters; each chunk ends
// with one `export { realName as x, … }` clause. A chunk is found by the real names in that
// clause (the file name only narrows the search), and each function is taken by its real name,
// so the loader survives a rebuild that reshuffles hashes and letters.
//
// OpenClaw reads OPENCLAW_STATE_DIR while its modules load: set it before calling `loadOpenClaw`.

import { readdirSync, readFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'

const here = fileURLToPath(new URL('.', import.meta.url))

/** Where scripts/openclaw.sh unpacks the package. */
export const DEFAULT_PACKAGE_DIR = resolve(here, '../../.tmp/openclaw/package')

/**
 * The chunks used, each by the real names its export clause must hold. `hint` is the chunk's
 * name without its hash: tried first, then every chunk of dist/. `importedBy` narrows the
 * search to the chunks an earlier one imports, where more than one chunk exports the names
 * (the state database is also bundled into a standalone entry with a module state of its own).
 */
export const CHUNKS = {
  sessionState: {
    hint: 'session-state-events-',
    names: [
      'recordSessionStateEvent',
      'recordSubagentSpawned',
      'recordSubagentTerminalState',
      'recordSessionCompacted',
      'recordSessionGoalChanged',
      'recordSessionHumanDirectMessage',
      'listSessionStateEventsSince',
      'getSessionStateVersion',
      'getSessionStateVersions',
      'registerSessionStateWatch',
      'registerMainSessionGroupWatch',
      'listAmbientGroupWatchTargets',
      'acknowledgeSessionStateNotices',
      'sweepSessionStateWatchNotices',
      'handleSessionStateSessionReset',
      'handleSessionStateSessionDeleted',
      'classifySessionStateActor',
      'decodeSessionStateNoticeContextKey',
      'upsertSessionUpstreamLink',
      'readSessionUpstreamLink',
      'updateSessionUpstreamLinkMarker',
      'deleteSessionUpstreamLink',
      'listWatchedSessionUpstreamLinks',
    ],
  },
  upstreamLinks: {
    hint: 'session-upstream-links.kernel-',
    names: ['rowToSessionUpstreamLink', 'listWatchedSessionUpstreamLinksInDatabase'],
  },
  stateDb: {
    importedBy: 'sessionState',
    hint: 'openclaw-state-db-',
    names: ['openOpenClawStateDatabase', 'runOpenClawStateWriteTransaction'],
  },
  stateDbCache: {
    importedBy: 'stateDb',
    hint: 'openclaw-state-db-cache-',
    names: ['closeOpenClawStateDatabase'],
  },
}

/**
 * The names a chunk exports, real name → exported name, read from its closing export clause.
 * @param {string} source the chunk's text
 * @returns {Map<string, string> | undefined}
 */
export function exportClause(source) {
  const m = /export\s*\{([^{}]*)\}\s*;?\s*$/.exec(source)
  if (!m) return undefined
  const out = new Map()
  for (const part of m[1].split(',')) {
    const words = part.trim().split(/\s+/)
    if (words.length === 1 && words[0]) out.set(words[0], words[0])
    else if (words.length === 3 && words[1] === 'as') out.set(words[0], words[2])
  }
  return out
}

/**
 * Finds the one chunk of `dist` whose export clause holds every name of `spec`.
 * @returns {{ file: string, exports: Map<string, string> }}
 */
export function findChunk(dist, spec, importer) {
  const files = importer
    ? [...readFileSync(importer, 'utf8').matchAll(/\bfrom\s*"\.\/([^"]+\.mjs)"/g)].map((m) => m[1])
    : readdirSync(dist).filter((f) => f.endsWith('.mjs'))
  const matches = (list) =>
    list.flatMap((f) => {
      const exports = exportClause(readFileSync(join(dist, f), 'utf8'))
      return exports && spec.names.every((n) => exports.has(n)) ? [{ file: join(dist, f), exports }] : []
    })
  let found = matches(files.filter((f) => f.startsWith(spec.hint)))
  if (found.length === 0) found = matches(files)
  if (found.length !== 1) {
    throw new Error(`openclaw: ${found.length} chunks export all of ${spec.names.join(', ')}`)
  }
  return found[0]
}

/**
 * Imports the chunks of `CHUNKS` and returns, per chunk, its functions by real name, plus the
 * chunk files and the package version.
 * @param {{ packageDir?: string }} [options]
 */
export async function loadOpenClaw(options = {}) {
  if (!process.env.OPENCLAW_STATE_DIR) {
    throw new Error('openclaw: set OPENCLAW_STATE_DIR before loading OpenClaw')
  }
  const packageDir = options.packageDir ?? process.env.OPENCLAW_PACKAGE_DIR ?? DEFAULT_PACKAGE_DIR
  const dist = join(packageDir, 'dist')
  const { version } = JSON.parse(readFileSync(join(packageDir, 'package.json'), 'utf8'))
  const out = { version, files: {} }
  for (const [key, spec] of Object.entries(CHUNKS)) {
    const { file, exports } = findChunk(dist, spec, spec.importedBy && out.files[spec.importedBy])
    const mod = await import(pathToFileURL(file).href)
    const fns = {}
    for (const [real, alias] of exports) fns[real] = mod[alias]
    out[key] = fns
    out.files[key] = file
  }
  return out
}
