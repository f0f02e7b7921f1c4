/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: 'node',
  testMatch: ['<rootDir>/__test__/**/*.test.ts'],
  // The PostgreSQL tests (__test__/postgres/) start throwaway servers with a harness that needs
  // sh, /proc and PostgreSQL's server binaries (run through runuser under root): Linux only.
  // The PostgreSQL store is tested on Linux; macOS and Windows keep every SQLite test of their
  // own binaries (async.test.ts is the Promise API's on a file). On
  // Linux nothing leaves them out (scripts/test.sh fails if anything does).
  testPathIgnorePatterns: ['/node_modules/', ...(process.platform === 'linux' ? [] : ['/__test__/postgres/'])],
  transform: { '^.+\\.ts$': ['ts-jest', { tsconfig: '<rootDir>/tsconfig.json' }] },
  testTimeout: 30000,
}
