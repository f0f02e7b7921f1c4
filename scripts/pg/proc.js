// Small process and port helpers the throwaway servers share (scripts/pg/cluster.js,
// scripts/pg/pgbouncer.js).
'use strict'
const fs = require('node:fs')
const net = require('node:net')

/** A port nobody listens on at this moment. */
function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer()
    s.unref()
    s.once('error', reject)
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address()
      s.close(() => resolve(port))
    })
  })
}

/** True while `pid` is a process that has not exited (a zombie counts as exited). */
function alive(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z'
  } catch {
    if (process.platform === 'linux') return false
  }
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** True once something accepts TCP connections on 127.0.0.1:`port`. */
function accepts(port) {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port }, () => {
      socket.destroy()
      resolve(true)
    })
    socket.once('error', () => resolve(false))
  })
}

module.exports = { freePort, alive, sleep, accepts }
