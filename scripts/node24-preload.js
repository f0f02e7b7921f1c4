// Preloaded into every process of the Node 24 run (scripts/node24.sh sets NODE_OPTIONS):
// tests start child processes that require better-sqlite3 by name, and the copy in
// node_modules is built for Node 20's ABI. Here the name resolves to the copy compiled for
// Node 24 instead; nothing else changes.
'use strict'
const Module = require('node:module')

const target = process.env.SESSION_AWARENESS_NODE24_SQLITE
if (target) {
  const resolve = Module._resolveFilename
  Module._resolveFilename = function (request, ...rest) {
    return resolve.call(this, request === 'better-sqlite3' ? target : request, ...rest)
  }
}
