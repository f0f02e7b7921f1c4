'use strict';
// The child process of one implementation (bench/child.js), shared by bench/run.js,
// bench/compare.js and bench/openclaw/harness.js.

const { fork } = require('node:child_process');
const path = require('node:path');

/** A child process of one implementation, answering one request at a time. `options` go to
 * `fork` (bench/openclaw/harness.js starts Node 24 children with them); `label` names the
 * child in its errors. */
function startChild(impl, options = {}, script = path.join(__dirname, 'child.js'), label = impl) {
  const child = fork(script, [impl], options);
  let waiting = null;
  child.on('message', (msg) => {
    const w = waiting;
    waiting = null;
    if (msg.ok) w.resolve(msg);
    else w.reject(new Error(`${label}: ${msg.error}`));
  });
  child.on('exit', (code) => {
    if (waiting) waiting.reject(new Error(`${label} process exited with ${code}`));
  });
  return {
    ask(msg) {
      return new Promise((resolve, reject) => {
        waiting = { resolve, reject };
        child.send(msg);
      });
    },
    stop() {
      child.send({ cmd: 'exit' });
    },
  };
}

module.exports = { startChild };
