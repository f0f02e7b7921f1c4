#!/usr/bin/env node
// The root package lists its platform packages in optionalDependencies, but until they are
// published the registry cannot resolve them, and `npm ci` refuses a lockfile that lacks
// them. So the lockfile resolves each one to its folder under npm/ (a link, as npm writes
// for a local folder): `npm ci` links the one matching this machine and skips the others,
// and a plain `npm install` keeps the entries. Run this after changing optionalDependencies
// or a platform package; `--check` only reports whether the lockfile is in sync.
'use strict'
const fs = require('node:fs')
const path = require('node:path')

const root = path.join(__dirname, '..')
const lockFile = path.join(root, 'package-lock.json')
const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'))
const lock = JSON.parse(fs.readFileSync(lockFile, 'utf8'))

const wanted = {}
for (const [name, version] of Object.entries(pkg.optionalDependencies || {})) {
  const dir = `npm/${name.slice(`${pkg.name}-`.length)}`
  const manifest = JSON.parse(fs.readFileSync(path.join(root, dir, 'package.json'), 'utf8'))
  if (manifest.name !== name || manifest.version !== version) {
    console.error(`${dir}/package.json is ${manifest.name}@${manifest.version}, want ${name}@${version}`)
    process.exit(1)
  }
  wanted[`node_modules/${name}`] = { resolved: dir, link: true }
  // Field order as npm writes it, so that npm's own rewrite of the lockfile is a no-op.
  const entry = { name, version }
  for (const field of ['cpu', 'libc', 'license']) if (manifest[field]) entry[field] = manifest[field]
  entry.optional = true
  for (const field of ['os', 'engines']) if (manifest[field]) entry[field] = manifest[field]
  wanted[dir] = entry
}
const optionalDependencies = Object.fromEntries(
  Object.entries(pkg.optionalDependencies || {}).sort(([a], [b]) => a.localeCompare(b, 'en')),
)

// Compared with keys sorted: only the content matters, not npm's field order.
const canonical = (v) =>
  Array.isArray(v)
    ? v.map(canonical)
    : v && typeof v === 'object'
      ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, canonical(v[k])]))
      : v
const same = (a, b) => JSON.stringify(canonical(a)) === JSON.stringify(canonical(b))
const isPlatformKey = (key) =>
  /^(node_modules\/)?npm\//.test(key) || key.startsWith(`node_modules/${pkg.name}-`)
const stale = Object.keys(lock.packages).filter((key) => isPlatformKey(key) && !(key in wanted))
const inSync =
  stale.length === 0 &&
  same(lock.packages[''].optionalDependencies, optionalDependencies) &&
  Object.keys(wanted).every((key) => same(lock.packages[key], wanted[key]))

if (process.argv.includes('--check')) {
  if (!inSync) {
    console.error(
      'package-lock.json does not resolve the platform packages to npm/: ' +
        'run node scripts/lock-platform-packages.js',
    )
    process.exit(1)
  }
  process.exit(0)
}

const packages = { ...lock.packages, ...wanted }
packages[''] = { ...packages[''], optionalDependencies }
for (const key of stale) delete packages[key]
// npm orders the entries by path, the root first.
lock.packages = Object.fromEntries(
  Object.keys(packages)
    .sort((a, b) => (a === '' ? -1 : b === '' ? 1 : a.localeCompare(b, 'en')))
    .map((key) => [key, packages[key]]),
)
fs.writeFileSync(lockFile, `${JSON.stringify(lock, null, 2)}\n`)
console.log(inSync ? 'package-lock.json already in sync' : 'package-lock.json updated')
