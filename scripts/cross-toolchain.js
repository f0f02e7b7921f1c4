#!/usr/bin/env node
// Puts the glibc 2.17 gcc toolchain that `napi build --use-napi-cross` uses for a Linux glibc
// target where napi looks for it first (~/.napi-rs/cross-toolchain/<version>/<triple>), from
// a toolchain package pinned here by version and integrity.
//
//   node scripts/cross-toolchain.js <triple>     (x86_64- or aarch64-unknown-linux-gnu)
//
// Why not let napi fetch it: napi asks the registry for the toolchain package at the version
// of @napi-rs/cross-toolchain (1.0.5), which was never published for these targets (the last
// are 1.0.0 for x86_64 and 1.0.3 for aarch64). Why not a devDependency: the toolchain packages
// declare `cpu: ["x64"]`, so `npm ci` would refuse to install the project on arm64 machines,
// and every CI job would download 90 MB it does not use. So the one build that needs a
// toolchain fetches it with `npm pack`, checks its integrity, and unpacks it once.
'use strict'
const { createHash } = require('node:crypto')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { execFileSync } = require('node:child_process')

/** The toolchains that run on an x86-64 Linux host, by the target they build for. */
const TOOLCHAINS = {
  'x86_64-unknown-linux-gnu': {
    name: '@napi-rs/cross-toolchain-x64-target-x86_64',
    version: '1.0.0',
    integrity:
      'sha512-lecoghCfoTAX9MLFcIx9/nL9M8xdkZ9n8Pki8qjKUNzjiq1zbECdEbzIZAMMHRtrXxifK9dAyYuh8gSxNbr2og==',
  },
  'aarch64-unknown-linux-gnu': {
    name: '@napi-rs/cross-toolchain-x64-target-aarch64',
    version: '1.0.3',
    integrity:
      'sha512-EMFcy/ahFsmCY3BI1tMC3wRUYZ+cDuILg7nP1micaKXW1tO1+RvUB1CC6QYe+cv2W4Tuz9wr3qcFExWyjgWf2w==',
  },
}

const root = path.join(__dirname, '..')
const napiDir = path.dirname(require.resolve('@napi-rs/cli', { paths: [root] }))
const crossManifest = require.resolve('@napi-rs/cross-toolchain/package.json', { paths: [napiDir] })

/** Where `napi build --use-napi-cross` looks for the toolchain of `triple`. */
function toolchainDir(triple) {
  const { version } = JSON.parse(fs.readFileSync(crossManifest, 'utf8'))
  return path.join(os.homedir(), '.napi-rs', 'cross-toolchain', version, triple)
}

/** Fetches, checks and unpacks the toolchain of `triple` unless it is already in place. */
function ensure(triple) {
  const pin = TOOLCHAINS[triple]
  if (!pin) throw new Error(`no pinned toolchain builds ${triple} (known: ${Object.keys(TOOLCHAINS).join(', ')})`)
  if (process.platform !== 'linux' || process.arch !== 'x64') {
    throw new Error(`the pinned toolchains run on linux-x64 only, not on ${process.platform}-${process.arch}`)
  }
  const dest = toolchainDir(triple)
  if (fs.existsSync(path.join(dest, 'package.json'))) return dest
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'sa-cross-'))
  try {
    const out = execFileSync('npm', ['pack', `${pin.name}@${pin.version}`, '--json', '--pack-destination', tmp], {
      cwd: tmp,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
      maxBuffer: 16 * 1024 * 1024,
    })
    const [info] = JSON.parse(out.slice(out.indexOf('[')))
    const tgz = fs.readFileSync(path.join(tmp, info.filename))
    const integrity = `sha512-${createHash('sha512').update(tgz).digest('base64')}`
    if (integrity !== pin.integrity) {
      throw new Error(`${pin.name}@${pin.version} has integrity ${integrity}, pinned ${pin.integrity}`)
    }
    // The system's tar and xz: napi's own unpacker (@napi-rs/lzma) needs Node 22.20 or later.
    execFileSync('tar', ['-xzf', path.join(tmp, info.filename), '-C', tmp, `package/${triple}.tar.xz`])
    // Unpacked beside its place and renamed into it, so an interrupted run leaves no half.
    const staging = `${dest}.partial-${process.pid}`
    fs.rmSync(staging, { recursive: true, force: true })
    fs.mkdirSync(staging, { recursive: true })
    execFileSync('tar', ['-xJf', path.join(tmp, 'package', `${triple}.tar.xz`), '-C', staging])
    fs.rmSync(dest, { recursive: true, force: true })
    fs.renameSync(staging, dest)
    return dest
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true })
  }
}

module.exports = { TOOLCHAINS, ensure, toolchainDir }

if (require.main === module) {
  const [triple] = process.argv.slice(2)
  try {
    console.log(`cross-toolchain: ${triple} -> ${ensure(triple)}`)
  } catch (err) {
    console.error(`cross-toolchain: ${err.message}`)
    process.exitCode = 1
  }
}
