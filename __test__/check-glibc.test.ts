// scripts/check-glibc.js, the glibc floor check of the Linux glibc binaries (npm test and the
// build job run it on the built addon): its reading of the ELF version-needed section agrees
// with binutils' readelf, and it fails a binary that needs a GLIBC_ version above --max.
import { spawnSync } from 'node:child_process'
import * as fs from 'node:fs'
import * as path from 'node:path'

const ROOT = path.join(__dirname, '..')
const SCRIPT = path.join(ROOT, 'scripts', 'check-glibc.js')
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { versionsNeeded, glibcFloor } = require(SCRIPT) as {
  versionsNeeded(buf: Buffer): Array<{ file: string; version: string }>
  glibcFloor(file: string): { version: string; files: string[] } | null
}
// An ELF reader needs an ELF file: this Node's own executable, on glibc Linux.
const glibcLinux = process.platform === 'linux' && Boolean(
  (process.report.getReport() as { header?: { glibcVersionRuntime?: string } }).header?.glibcVersionRuntime,
)
const onGlibcLinux = glibcLinux ? test : test.skip
const hasReadelf = spawnSync('readelf', ['--version']).status === 0
const withReadelf = glibcLinux && hasReadelf ? test : test.skip

const check = (...args: string[]) => {
  const out = spawnSync(process.execPath, [SCRIPT, ...args], { encoding: 'utf8' })
  return { status: out.status, stdout: out.stdout, stderr: out.stderr }
}

withReadelf('every version this Node needs, as readelf lists them', () => {
  const out = spawnSync('readelf', ['--version-info', '--wide', process.execPath], { encoding: 'utf8', maxBuffer: 1 << 28 }).stdout
  const section = out.slice(out.indexOf("Version needs section '.gnu.version_r'"))
  const fromReadelf: string[] = []
  let file = ''
  for (const line of section.split('\n')) {
    const f = /File: (\S+)\s+Cnt:/.exec(line)
    if (f) file = f[1]
    const n = /Name: (\S+)\s+Flags:/.exec(line)
    if (n) fromReadelf.push(`${file} ${n[1]}`)
  }
  const ours = versionsNeeded(fs.readFileSync(process.execPath)).map((v) => `${v.file} ${v.version}`)
  expect(fromReadelf.length).toBeGreaterThan(5)
  expect(ours.sort()).toEqual(fromReadelf.sort())
})

onGlibcLinux('a binary needing a newer glibc than --max fails; one within it passes', () => {
  const floor = glibcFloor(process.execPath)
  expect(floor?.version).toMatch(/^GLIBC_2\.\d+$/)
  const minor = Number(floor!.version.split('.')[1])
  const over = check('--max', `2.${minor - 1}`, process.execPath)
  expect(over.status).toBe(1)
  expect(over.stdout).toBe(`${process.execPath}: needs ${floor!.version} (from ${floor!.files.join(', ')}), newer than GLIBC_2.${minor - 1}\n`)
  const within = check('--max', `2.${minor}`, process.execPath)
  expect([within.status, within.stdout]).toEqual([0, `${process.execPath}: needs ${floor!.version} (from ${floor!.files.join(', ')})\n`])
})

test('a file that is not ELF, or no file, is a failure, not a pass', () => {
  const notElf = check(path.join(ROOT, 'package.json'))
  expect([notElf.status, notElf.stderr]).toEqual([1, `${path.join(ROOT, 'package.json')}: not an ELF file\n`])
  expect(check().status).toBe(1)
  expect(check('--max', 'x', path.join(ROOT, 'package.json')).status).toBe(1)
})
