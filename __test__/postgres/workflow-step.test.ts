// ci.yml's PostgreSQL step (in the rust-test job and the Linux test cells), run here as a
// runner would: with a pg_config that names a server folder it installs nothing and exports
// that folder as SESSION_AWARENESS_PG_BINDIR; else it takes the newest
// /usr/lib/postgresql/<version>/bin that holds initdb, installing PostgreSQL with apt-get
// first when there is none. The cases without pg_config run on a stand-in for
// /usr/lib/postgresql and a stand-in sudo that records its arguments (and "installs" a
// server folder). In __test__/postgres/: the first case needs this machine's binaries.
import { spawnSync } from 'node:child_process'
import * as fs from 'node:fs'
import * as os from 'node:os'
import * as path from 'node:path'

import * as yaml from 'js-yaml'

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Yaml = any

const ci: Yaml = yaml.load(fs.readFileSync(path.join(__dirname, '..', '..', '.github', 'workflows', 'ci.yml'), 'utf8'))
const PG_STEP: Yaml = ci.jobs['rust-test'].steps.find((s: Yaml) => s.name?.startsWith('PostgreSQL server binaries'))
const which = (tool: string) => spawnSync('bash', ['-c', `command -v ${tool}`], { encoding: 'utf8' }).stdout.trim()

let work: string
let tools: string
beforeAll(() => {
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'sa-pg-step-'))
  // PATH without pg_config: the step's other tools, and a sudo that records its arguments
  // and, for `apt-get install`, makes a PostgreSQL 16 server folder in the stand-in root.
  tools = path.join(work, 'bin')
  fs.mkdirSync(tools)
  for (const tool of ['ls', 'sort', 'tail']) fs.symlinkSync(which(tool), path.join(tools, tool))
  fs.writeFileSync(path.join(tools, 'sudo'), [
    '#!/bin/sh',
    `echo "$*" >> "${work}/sudo.log"`,
    'case "$*" in *install*) /bin/mkdir -p "$PG_ROOT/16/bin" && : > "$PG_ROOT/16/bin/initdb" &&',
    '  printf \'#!/bin/sh\\necho "postgres (PostgreSQL) 16.0 (stand-in)"\\n\' > "$PG_ROOT/16/bin/postgres" &&',
    '  /bin/chmod +x "$PG_ROOT/16/bin/initdb" "$PG_ROOT/16/bin/postgres" ;; esac',
    '',
  ].join('\n'), { mode: 0o755 })
})
afterAll(() => fs.rmSync(work, { recursive: true, force: true }))

/** Runs the step with `PATH`, on `root` in place of /usr/lib/postgresql when given. */
function run(pathDirs: string[], root?: string) {
  const env = path.join(work, 'github-env')
  fs.writeFileSync(env, '')
  fs.rmSync(path.join(work, 'sudo.log'), { force: true })
  let text: string = PG_STEP.run
  if (root) {
    expect(text.split('/usr/lib/postgresql/').length).toBe(2)
    text = text.replace('/usr/lib/postgresql/', `${root}/`)
  }
  const out = spawnSync(which('bash'), ['-eo', 'pipefail', '-c', text], {
    encoding: 'utf8', env: { PATH: pathDirs.join(':'), GITHUB_ENV: env, PG_ROOT: root ?? '' },
  })
  const log = path.join(work, 'sudo.log')
  return {
    status: out.status,
    stdout: out.stdout,
    env: fs.readFileSync(env, 'utf8'),
    sudo: fs.existsSync(log) ? fs.readFileSync(log, 'utf8') : '',
  }
}

/** A stand-in /usr/lib/postgresql with these <version>/bin folders, each holding `files`. */
function root(name: string, folders: Record<string, string[]>): string {
  const dir = path.join(work, name)
  for (const [version, files] of Object.entries(folders)) {
    fs.mkdirSync(path.join(dir, version, 'bin'), { recursive: true })
    for (const f of files) {
      const text = f === 'postgres' ? `#!/bin/sh\necho "postgres (PostgreSQL) ${version}.0 (stand-in)"\n` : ''
      fs.writeFileSync(path.join(dir, version, 'bin', f), text, { mode: 0o755 })
    }
  }
  fs.mkdirSync(dir, { recursive: true })
  return dir
}

test('with pg_config naming a server folder: that folder, nothing installed', () => {
  const here = spawnSync('pg_config', ['--bindir'], { encoding: 'utf8' }).stdout.trim()
  const version = spawnSync(path.join(here, 'postgres'), ['--version'], { encoding: 'utf8' }).stdout
  expect(run([process.env.PATH ?? ''])).toEqual({
    status: 0, stdout: version, env: `SESSION_AWARENESS_PG_BINDIR=${here}\n`, sudo: '',
  })
})

test('without pg_config: the newest version folder that holds initdb, nothing installed', () => {
  // 9 before 14 (a version sort), and 17 has a client only.
  const dir = root('installed', { 9: ['initdb', 'postgres'], 14: ['initdb', 'postgres'], 17: ['psql'] })
  expect(run([tools], dir)).toEqual({
    status: 0,
    stdout: 'postgres (PostgreSQL) 14.0 (stand-in)\n',
    env: `SESSION_AWARENESS_PG_BINDIR=${dir}/14/bin\n`,
    sudo: '',
  })
})

test('without any server: apt-get installs PostgreSQL, and its folder is exported', () => {
  const dir = root('none', { 17: ['psql'] })
  expect(run([tools], dir)).toEqual({
    status: 0,
    stdout: 'postgres (PostgreSQL) 16.0 (stand-in)\n',
    env: `SESSION_AWARENESS_PG_BINDIR=${dir}/16/bin\n`,
    sudo: 'apt-get update\napt-get install -y --no-install-recommends postgresql\n',
  })
})
