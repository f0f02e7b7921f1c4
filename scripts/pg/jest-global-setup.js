// Jest globalSetup: one throwaway cluster for the whole run, its URL in SESSION_AWARENESS_PG_URL
// (test files started after it inherit it). Enable with
//   globalSetup: '<rootDir>/scripts/pg/jest-global-setup.js',
//   globalTeardown: '<rootDir>/scripts/pg/jest-global-teardown.js',
// Test files that use __test__/postgres/cluster.ts's usePostgres() then share this cluster
// instead of starting their own.
'use strict'
const { startCluster } = require('./cluster')

module.exports = async function globalSetup() {
  const cluster = await startCluster({ name: 'jest' })
  globalThis.__SESSION_AWARENESS_PG__ = cluster
  process.env.SESSION_AWARENESS_PG_URL = cluster.url
  process.env.SESSION_AWARENESS_PG_PASSWORD_URL = cluster.passwordUrl
}
