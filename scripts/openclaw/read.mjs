// Prints, as JSON, what OpenClaw's published code reports for `<stateDir>/state/openclaw.sqlite`
// (see report.mjs). Usage: node24 scripts/openclaw/read.mjs <stateDir>
// Exits 0 with the report, or 1 with OpenClaw's error when it refuses to open the file.

const stateDir = process.argv[2]
if (!stateDir) {
  console.error('usage: read.mjs <stateDir>')
  process.exit(2)
}
process.env.OPENCLAW_STATE_DIR = stateDir
const { loadOpenClaw } = await import('./load.mjs')
const { openClawReport } = await import('./report.mjs')
const oc = await loadOpenClaw()
try {
  // OpenClaw validates its schema here and throws on a file it would not use.
  oc.stateDb.openOpenClawStateDatabase()
} catch (e) {
  console.error(String(e?.message ?? e))
  process.exit(1)
}
const report = await openClawReport(oc)
oc.stateDbCache.closeOpenClawStateDatabase()
process.stdout.write(`${JSON.stringify(report)}\n`)
process.exit(0)
