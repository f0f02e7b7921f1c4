// The generated loader (index.js) on Linux picks the platform package of the C library it
// runs on: the musl one where /usr/bin/ldd is musl's (Alpine), the glibc one elsewhere. Run
// on a copy of the loader, with stand-in platform packages and /usr/bin/ldd's text given by
// a preload, since this machine has one C library only.
import { spawnSync } from 'node:child_process'
import * as fs from 'node:fs'
import * as os from 'node:os'
import * as path from 'node:path'

const ROOT = path.join(__dirname, '..')
const linux = process.platform === 'linux' && (process.arch === 'x64' || process.arch === 'arm64')
const onLinux = linux ? test : test.skip
const version: string = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')).version

let dir: string
beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sa-loader-'))
  fs.copyFileSync(path.join(ROOT, 'index.js'), path.join(dir, 'index.js'))
  for (const libc of ['gnu', 'musl']) {
    const name = `session-awareness-linux-${process.arch}-${libc}`
    fs.mkdirSync(path.join(dir, 'node_modules', name), { recursive: true })
    fs.writeFileSync(path.join(dir, 'node_modules', name, 'package.json'), JSON.stringify({ name, version, main: 'binding.js' }))
    fs.writeFileSync(path.join(dir, 'node_modules', name, 'binding.js'), `module.exports = { standIn: ${JSON.stringify(name)} }\n`)
  }
  // What /usr/bin/ldd holds, from LDD_TEXT: musl's is a script naming ld-musl, glibc's names GNU libc.
  fs.writeFileSync(path.join(dir, 'ldd.js'), `
const fs = require('node:fs')
const read = fs.readFileSync
fs.readFileSync = function (file, ...rest) {
  if (file === '/usr/bin/ldd') return process.env.LDD_TEXT
  return read.call(this, file, ...rest)
}
`)
})
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }))

function loaded(lddText: string): string {
  const env: NodeJS.ProcessEnv = { ...process.env, LDD_TEXT: lddText, NAPI_RS_ENFORCE_VERSION_CHECK: '1' }
  delete env.NAPI_RS_NATIVE_LIBRARY_PATH
  delete env.NAPI_RS_FORCE_WASI
  delete env.NODE_OPTIONS
  const out = spawnSync(process.execPath, ['-r', './ldd.js', '-p', 'require("./index.js").standIn'], { cwd: dir, encoding: 'utf8', env })
  expect(out.stderr).toBe('')
  return out.stdout.trim()
}

onLinux('a musl system loads the musl package, a glibc system the gnu one', () => {
  expect(loaded('#!/bin/sh\nexec /lib/ld-musl-x86_64.so.1 --list "$@"\n')).toBe(`session-awareness-linux-${process.arch}-musl`)
  expect(loaded('#! /bin/bash\n# ldd (GNU libc) 2.36\n')).toBe(`session-awareness-linux-${process.arch}-gnu`)
})
