// Applies the PostgreSQL store's schema (crates/core/src/postgres/schema.sql) through a
// node-postgres client, as the store will at open: one transaction, the file's advisory lock
// first. Used by the tests of the schema and by the node-postgres baseline benchmark.
'use strict'
const fs = require('node:fs')
const path = require('node:path')

const FILE = path.join(__dirname, '..', '..', 'crates', 'core', 'src', 'postgres', 'schema.sql')

/** The default schema name. */
const DEFAULT_SCHEMA = 'session_awareness'

/** A schema name the store accepts: a plain lowercase identifier of at most 63 bytes, not `pg_…`. */
function checkSchemaName(name) {
  if (typeof name !== 'string' || !/^[a-z_][a-z0-9_]{0,62}$/.test(name) || name.startsWith('pg_')) {
    throw Object.assign(new Error(`not a schema name the store accepts: ${JSON.stringify(name)}`), {
      code: 'ERR_INVALID_ARG',
    })
  }
  return name
}

/** The file's text with `schema` put in. */
function schemaSql(schema = DEFAULT_SCHEMA) {
  return fs.readFileSync(FILE, 'utf8').replaceAll('__SCHEMA__', checkSchemaName(schema))
}

/** Runs the file in one transaction on `client` (a connected pg Client); rolls back on failure. */
async function applySchema(client, schema = DEFAULT_SCHEMA) {
  const sql = schemaSql(schema)
  await client.query('BEGIN')
  try {
    await client.query(sql)
    await client.query('COMMIT')
  } catch (e) {
    await client.query('ROLLBACK').catch(() => {})
    throw e
  }
}

module.exports = { DEFAULT_SCHEMA, FILE, applySchema, checkSchemaName, schemaSql }
