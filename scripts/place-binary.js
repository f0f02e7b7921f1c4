#!/usr/bin/env node
// After `napi build --platform`: copy the binary just built for this machine (or for
// `--target <triple>`) into its platform package (npm/<platformArchABI>/), which is what
// `npm pack` there ships. The copy beside index.js stays for local development and the
// repository's own tests.
'use strict'
const fs = require('node:fs')
const path = require('node:path')

const root = path.join(__dirname, '..')
const { napi } = require(path.join(root, 'package.json'))

/** The napi-rs platformArchABI of this machine, e.g. `linux-x64-gnu`. */
function platformArchAbi() {
  const { platform, arch } = process
  if (platform === 'linux') {
    const header = process.report ? process.report.getReport().header : {}
    return `linux-${arch}-${header.glibcVersionRuntime ? 'gnu' : 'musl'}`
  }
  if (platform === 'win32') return `win32-${arch}-msvc`
  return `${platform}-${arch}`
}

const at = process.argv.indexOf('--target')
const abi =
  at >= 0 ? require('@napi-rs/cli').parseTriple(process.argv[at + 1]).platformArchABI : platformArchAbi()
const file = `${napi.binaryName}.${abi}.node`
const from = path.join(root, file)
const dir = path.join(root, 'npm', abi)
if (!fs.existsSync(from)) {
  console.error(`place-binary: ${file} was not built`)
  process.exit(1)
}
if (!fs.existsSync(path.join(dir, 'package.json'))) {
  console.log(`place-binary: no platform package for ${abi}; ${file} stays beside index.js`)
  process.exit(0)
}
fs.copyFileSync(from, path.join(dir, file))
console.log(`place-binary: ${file} -> ${path.relative(root, dir)}/`)
