// Jest under Node 24 (scripts/node24.sh): the project's config, with better-sqlite3 mapped to
// the copy compiled for Node 24's ABI.
const path = require('node:path')
const base = require('../jest.config.js')

module.exports = {
  ...base,
  rootDir: path.join(__dirname, '..'),
  moduleNameMapper: {
    ...base.moduleNameMapper,
    '^better-sqlite3$': '<rootDir>/.tmp/node24/deps/node_modules/better-sqlite3',
  },
}
