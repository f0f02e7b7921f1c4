// ci.yml's PostgreSQL step (in the rust-test job and the Linux test cells), run here as a
// runner would: with pg_config on PATH it installs nothing and exports that server folder as
// SESSION_AWARENESS_PG_BINDIR; on an image without PostgreSQL it installs it with apt-get
// (here a stand-in sudo that records its arguments) and exports the newest
// /usr/lib/postgresql/<version>/bin. In __test__/postgres/: it needs this machine's binaries.
import { spawnSync } from 'node:child_process'
import * as fs from 'node:fs'
import * as os from 'node:os'
import * as path from 'node:path'

import * as yaml from 'js-yaml'

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Yaml = any

const ci: Yaml = yaml.load(fs.readFileSync(path.join(__dirname, '..', '..', '.github', 'workflows', 'ci.yml'), 'utf8'))
const PG_STEP: Yaml = ci.jobs['rust-test'].steps.find((s: Yaml) => s.name?.startsWith('PostgreSQL server binaries'))

let work: string
beforeAll(() => {
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'sa-pg-step-'))
})
afterAll(() => fs.rmSync(work, { recursive: true, force: true }))

test('the step uses the binaries pg_config names, else installs PostgreSQL, and exports the folder', () => {
  const bin = work
  const which = (tool: string) => spawnSync('bash', ['-c', `command -v ${tool}`], { encoding: 'utf8' }).stdout.trim()
  const run = (pathDirs: string[]) => {
    const env = path.join(bin, `env-${pathDirs.length}`)
    fs.writeFileSync(env, '')
    fs.rmSync(path.join(bin, 'sudo.log'), { force: true })
    const out = spawnSync(which('bash'), ['-eo', 'pipefail', '-c', PG_STEP.run], {
      encoding: 'utf8', env: { PATH: pathDirs.join(':'), GITHUB_ENV: env },
    })
    const sudo = fs.existsSync(path.join(bin, 'sudo.log')) ? fs.readFileSync(path.join(bin, 'sudo.log'), 'utf8') : ''
    return { status: out.status, stdout: out.stdout, env: fs.readFileSync(env, 'utf8'), sudo }
  }
  const version = (dir: string) => spawnSync(path.join(dir, 'postgres'), ['--version'], { encoding: 'utf8' }).stdout
  // With pg_config on PATH: nothing is installed.
  const here = spawnSync('pg_config', ['--bindir'], { encoding: 'utf8' }).stdout.trim()
  expect(run([process.env.PATH ?? ''])).toEqual({
    status: 0, stdout: version(here), env: `SESSION_AWARENESS_PG_BINDIR=${here}\n`, sudo: '',
  })
  // Without it (an image without PostgreSQL): apt-get installs it, here a stand-in sudo that
  // records its arguments; the newest /usr/lib/postgresql/<version>/bin is exported.
  fs.writeFileSync(path.join(bin, 'sudo'), `#!/bin/sh\necho "$*" >> ${bin}/sudo.log\n`, { mode: 0o755 })
  for (const tool of ['ls', 'sort', 'tail']) fs.symlinkSync(which(tool), path.join(bin, tool))
  const newest = `/usr/lib/postgresql/${fs.readdirSync('/usr/lib/postgresql').sort((a, b) => Number(a) - Number(b)).at(-1)}/bin`
  expect(run([bin])).toEqual({
    status: 0,
    stdout: version(newest),
    env: `SESSION_AWARENESS_PG_BINDIR=${newest}\n`,
    sudo: 'apt-get update\napt-get install -y --no-install-recommends postgresql\n',
  })
})
