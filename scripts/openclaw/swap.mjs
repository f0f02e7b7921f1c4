// Serves, in place of OpenClaw's session-state chunk, a module generated from it: the same
// export letters (its importers write `import { C as decodeSessionStateNoticeContextKey } …`),
// each bound to a function of another implementation. Installed with Node 24's in-thread
// `module.registerHooks`, before any OpenClaw chunk is imported.
//
// Implementations:
// - `original`  no swap: OpenClaw's own chunk, as published.
// - `passthrough` the generated module re-exports the original chunk's functions, loaded under
//   another URL (`?session-awareness-original`). Proves that every importer gets the served
//   module; the original code still runs.
// - `adapter`   the generated module takes each function from `session-awareness/openclaw` and
//   configures it with OpenClaw's own host services, imported from their chunks by the bindings
//   the original chunk imports them with. The original chunk is never loaded.
//
// In every mode the reply chunk is served with one more export clause naming
// `drainFormattedSystemEvents`, the reply path's drain, which the bundle keeps private: the test
// calls OpenClaw's own function instead of a whole model turn. Nothing else is changed.

import { registerHooks } from 'node:module'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { exportClause, findChunk, CHUNKS } from './load.mjs'

/** The query that loads the original chunk beside the served module (pass-through only). */
const ORIGINAL_QUERY = '?session-awareness-original'

/**
 * The host services OpenClaw's chunk imports, by real name; the adapter receives each under
 * that name. `parseAgentSessionKey` is not imported by the chunk: it comes from the chunk that
 * exports `resolveAgentIdFromSessionKey`.
 */
export const HOST_SERVICES = [
  'enqueueSystemEvent',
  'requestSessionEventWake',
  'isSystemEventStoreCurrent',
  'resolvePhysicalSessionStorePath',
  'captureSessionWatcherStorePaths',
  'loadSessionEntryReadOnly',
  'classifySessionKind',
  'buildAgentMainSessionKey',
  'resolveAgentIdFromSessionKey',
  'isSubagentSessionKey',
  'parseAgentSessionKey',
]

/** The static imports of a chunk: `{ from, bindings: Map<local, exported> }` per statement. */
export function chunkImports(source) {
  const out = []
  for (const m of source.matchAll(/^import\s*\{([^{}]*)\}\s*from\s*"([^"]+)";?$/gm)) {
    const bindings = new Map()
    for (const part of m[1].split(',')) {
      const words = part.trim().split(/\s+/)
      if (words.length === 1 && words[0]) bindings.set(words[0], words[0])
      else if (words.length === 3 && words[1] === 'as') bindings.set(words[2], words[0])
    }
    out.push({ from: m[2], bindings })
  }
  return out
}

/**
 * The source of the module served in place of the session-state chunk.
 * @param {{ chunkFile: string, chunkUrl: string, dist: string, mode: 'passthrough' | 'adapter', adapterUrl?: string, statePath?: string }} o
 */
export function shimSource(o) {
  const source = readFileSync(o.chunkFile, 'utf8')
  const exports = exportClause(source)
  const lines = []
  if (o.mode === 'passthrough') {
    lines.push(`import * as impl from ${JSON.stringify(o.chunkUrl + ORIGINAL_QUERY)};`)
    for (const [real, letter] of exports) {
      // The original module's namespace is keyed by letter.
      lines.push(`export const ${letter} = impl.${letter}; // ${real}`)
    }
    return lines.join('\n') + '\n'
  }
  // adapter: host services by the bindings the original chunk imports them with.
  const wanted = new Set(HOST_SERVICES)
  const got = new Set()
  for (const imp of chunkImports(source)) {
    const picked = [...imp.bindings].filter(([local]) => wanted.has(local))
    if (picked.length === 0) continue
    lines.push(`import { ${picked.map(([local, letter]) => `${letter} as ${local}`).join(', ')} } from ${JSON.stringify(imp.from)};`)
    for (const [local] of picked) got.add(local)
  }
  for (const name of HOST_SERVICES.filter((n) => !got.has(n))) {
    // Not imported by the chunk: taken from the chunk of dist/ whose export clause names it.
    const { file, exports: ex } = findChunk(o.dist, { hint: 'session-key-', names: [name, 'resolveAgentIdFromSessionKey'] })
    lines.push(`import { ${ex.get(name)} as ${name} } from ${JSON.stringify('./' + file.slice(o.dist.length + 1))};`)
    got.add(name)
  }
  lines.push(`import * as adapter from ${JSON.stringify(o.adapterUrl)};`)
  lines.push(`adapter.configureSessionState({`)
  lines.push(`  path: ${JSON.stringify(o.statePath)},`)
  lines.push(`  host: { ${HOST_SERVICES.join(', ')} },`)
  lines.push(`});`)
  // A name the adapter lacks stays undefined (a caller of it fails at once) and is listed in
  // `missing`, which the test reports as a failure.
  lines.push(`export const missing = [];`)
  for (const [real, letter] of exports) {
    lines.push(`if (typeof adapter.${real} !== 'function') missing.push(${JSON.stringify(real)});`)
    lines.push(`export const ${letter} = adapter.${real};`)
  }
  return lines.join('\n') + '\n'
}

/**
 * Installs the hooks. Returns the record of what was served and loaded, for assertions.
 * @param {{ packageDir: string, mode: 'original' | 'passthrough' | 'adapter', adapterUrl?: string, statePath?: string }} o
 */
export function installSwap(o) {
  const dist = join(o.packageDir, 'dist')
  const chunk = findChunk(dist, CHUNKS.sessionState)
  const reply = findChunk(dist, { hint: 'get-reply-', names: ['getReplyFromConfig', 'prewarmReplyRunRuntimes'] })
  const chunkUrl = pathToFileURL(chunk.file).href
  const replyUrl = pathToFileURL(reply.file).href
  const record = { chunkFile: chunk.file, served: 0, originalLoads: [], shim: undefined }
  registerHooks({
    load(url, context, nextLoad) {
      const bare = url.split('?')[0]
      if (bare === chunkUrl) {
        if (o.mode !== 'original' && url === chunkUrl) {
          record.served += 1
          record.shim = shimSource({ ...o, chunkFile: chunk.file, chunkUrl, dist })
          return { format: 'module', source: record.shim, shortCircuit: true }
        }
        record.originalLoads.push(url)
      }
      const result = nextLoad(url, context)
      if (url === replyUrl) {
        const text = String(result.source)
        if (!/\bfunction drainFormattedSystemEvents\(/.test(text)) {
          throw new Error('openclaw: the reply chunk has no drainFormattedSystemEvents')
        }
        return { ...result, source: `${text}\nexport { drainFormattedSystemEvents as __drainFormattedSystemEvents };\n` }
      }
      return result
    },
  })
  return { record, chunkUrl, replyFile: reply.file }
}
