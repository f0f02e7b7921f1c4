// Jest globalTeardown: stops the cluster of scripts/pg/jest-global-setup.js.
'use strict'

module.exports = async function globalTeardown() {
  const cluster = globalThis.__SESSION_AWARENESS_PG__
  if (cluster) await cluster.stop()
}
