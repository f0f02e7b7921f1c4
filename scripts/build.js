#!/usr/bin/env node
// `npm run build`: the release addon for this machine, or for `--target <triple>`, placed in
// its platform package, then the TypeScript layer (dist/).
//
//   node scripts/build.js [--target <triple>]
//
// A Linux glibc target built on an x86-64 Linux host links against glibc 2.17 with napi's
// cross toolchain (`--use-napi-cross`, gcc and a glibc 2.17 sysroot, also used for the
// bundled SQLite's C), so the binary loads on every distribution since RHEL 7 and not only
// on systems as new as the build machine. A musl target is linked dynamically against musl
// (-crt-static), as a Node addon must be.
'use strict'
const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')

const root = path.join(__dirname, '..')
const napi = path.join(root, 'node_modules', '@napi-rs', 'cli', 'dist', 'cli.js')
const tsc = path.join(root, 'node_modules', 'typescript', 'bin', 'tsc')

const argv = process.argv.slice(2)
const at = argv.indexOf('--target')
const target = at >= 0 ? argv[at + 1] : hostTriple()
if (!target) {
  console.error('build: --target needs a triple')
  process.exit(1)
}

/** The Rust host triple, from `rustc -vV` as cargo sees it here. */
function hostTriple() {
  const out = spawnSync('rustc', ['-vV'], { cwd: root, encoding: 'utf8' })
  const line = (out.stdout || '').split('\n').find((l) => l.startsWith('host: '))
  if (!line) {
    console.error(`build: rustc -vV printed no host line\n${out.stderr || out.error}`)
    process.exit(1)
  }
  return line.slice('host: '.length).trim()
}

function run(cmd, args, env = process.env) {
  console.log(`build: ${path.basename(cmd)} ${args.join(' ')}`)
  const out = spawnSync(cmd, args, { cwd: root, stdio: 'inherit', env })
  if (out.status !== 0) process.exit(out.status ?? 1)
}

const env = { ...process.env }
const args = [napi, 'build', '--platform', '--release', '--no-const-enum', '--target', target]
if (/-linux-gnu$/.test(target) && process.platform === 'linux' && process.arch === 'x64') {
  const { ensure } = require('./cross-toolchain.js')
  ensure(target)
  args.push('--use-napi-cross')
} else if (/-linux-gnu$/.test(target)) {
  console.warn(`build: no glibc 2.17 toolchain runs on ${process.arch}: ${target} links against this machine's glibc`)
}
if (/-linux-musl$/.test(target)) {
  const key = `CARGO_TARGET_${target.toUpperCase().replace(/-/g, '_')}_RUSTFLAGS`
  if (!env[key]) env[key] = '-C target-feature=-crt-static'
}
run(process.execPath, args, env)
run(process.execPath, [path.join(__dirname, 'place-binary.js'), '--target', target])
if (!fs.existsSync(tsc)) {
  console.error('build: typescript is not installed (npm ci)')
  process.exit(1)
}
run(process.execPath, [tsc, '-p', 'lib'])
