#!/usr/bin/env node
// The two manifest steps of the release workflow, run from the package root:
//
//   node scripts/release-manifests.js check <tag>
//     The tag is `v` + package.json's version; every target in napi.targets has its folder
//     npm/<platformArchABI>/ with a package.json named <name>-<platformArchABI> at that same
//     version, listed at that version in optionalDependencies, and nothing else is listed.
//   node scripts/release-manifests.js stamp <repository-url>
//     Puts the repository into the root package.json (or, when it already names one, checks
//     that it is the same repository) and into every platform package, and copies LICENSE
//     into every platform package. npm's provenance check requires repository.url to match
//     the repository the workflow runs in, and MIT asks that the notice travel with each copy.
//
// Problems are printed one a line and exit 1; nothing is written unless every check passes.
'use strict'
const fs = require('node:fs')
const path = require('node:path')

const root = process.cwd()
const readJson = (file) => JSON.parse(fs.readFileSync(path.join(root, file), 'utf8'))
const writeJson = (file, value) =>
  fs.writeFileSync(path.join(root, file), `${JSON.stringify(value, null, 2)}\n`)

/** The platform package folders the napi config names, as `npm/<platformArchABI>`. */
function platformDirs(pkg) {
  // Loaded here, not at the top: the napi CLI is a large module graph, and a usage error or
  // a malformed URL needs none of it.
  const { parseTriple } = require('@napi-rs/cli')
  return (pkg.napi?.targets ?? []).map((t) => `npm/${parseTriple(t).platformArchABI}`)
}

/** Everything wrong between the tag, the root manifest and the platform manifests. */
function checkProblems(tag, pkg) {
  const problems = []
  if (tag !== `v${pkg.version}`) problems.push(`tag ${tag} does not name version ${pkg.version}`)
  const optional = { ...(pkg.optionalDependencies ?? {}) }
  for (const dir of platformDirs(pkg)) {
    const want = `${pkg.name}-${path.basename(dir)}`
    if (!fs.existsSync(path.join(root, dir, 'package.json'))) {
      problems.push(`${dir}/package.json is missing`)
    } else {
      const m = readJson(`${dir}/package.json`)
      if (m.name !== want) problems.push(`${dir}/package.json is named ${m.name}, want ${want}`)
      if (m.version !== pkg.version) {
        problems.push(`${dir}/package.json is at ${m.version}, want ${pkg.version}`)
      }
    }
    if (optional[want] !== pkg.version) {
      problems.push(`optionalDependencies lists ${want} at ${optional[want]}, want ${pkg.version}`)
    }
    delete optional[want]
  }
  for (const extra of Object.keys(optional)) {
    problems.push(`optionalDependencies lists ${extra}, which no napi target builds`)
  }
  return problems
}

/** `git+https://host/o/r.git`, `https://host/o/r/` and `https://host/o/r` name one repository. */
const sameRepository = (a, b) => {
  const norm = (u) => u.replace(/^git\+/, '').replace(/\.git$/, '').replace(/\/+$/, '')
  return norm(a) === norm(b)
}

/** The stamp step: returns its problems, or writes every manifest and returns none. */
function stamp(url, pkg) {
  if (!/^https:\/\/[^/\s]+\/[^/\s]+\/[^/\s]+$/.test(url)) {
    return [`${url} is not a repository URL of the form https://host/owner/name`]
  }
  const problems = []
  const repository = pkg.repository ?? { type: 'git', url: `git+${url}.git` }
  const current = typeof repository === 'string' ? repository : repository.url
  if (typeof current !== 'string' || !sameRepository(current, url)) {
    problems.push(`package.json names repository ${current}, but this runs in ${url}`)
  }
  if (!fs.existsSync(path.join(root, 'LICENSE'))) problems.push('LICENSE is missing')
  const dirs = platformDirs(pkg)
  for (const dir of dirs) {
    if (!fs.existsSync(path.join(root, dir, 'package.json'))) {
      problems.push(`${dir}/package.json is missing`)
    }
  }
  if (problems.length > 0) return problems

  writeJson('package.json', { ...pkg, repository })
  for (const dir of dirs) {
    const manifest = readJson(`${dir}/package.json`)
    writeJson(`${dir}/package.json`, { ...manifest, repository })
    fs.copyFileSync(path.join(root, 'LICENSE'), path.join(root, dir, 'LICENSE'))
    console.log(`${dir}: repository ${repository.url ?? repository}, LICENSE`)
  }
  return []
}

const [command, arg] = process.argv.slice(2)
const pkg = readJson('package.json')
let problems
if (command === 'check' && arg) {
  problems = checkProblems(arg, pkg)
  if (problems.length === 0) {
    console.log(`${arg}: ${pkg.name} and ${platformDirs(pkg).length} platform packages at ${pkg.version}`)
  }
} else if (command === 'stamp' && arg) {
  problems = stamp(arg, pkg)
} else {
  problems = ['usage: release-manifests.js check <tag> | stamp <repository-url>']
}
for (const p of problems) console.error(`release-manifests: ${p}`)
process.exitCode = problems.length === 0 ? 0 : 1
