'use strict';
// TEMPORARY: a stand-in for the Promise API until `recordAsync` and `closeAsync` exist in the
// addon, so the harness in bench/async.js runs end to end. It records on the JS thread and
// returns a settled promise: its numbers measure nothing about the real API. Removed as soon
// as the addon has the methods.

/** Adds `recordAsync` and `closeAsync` to `SessionState` where the addon lacks them. */
module.exports = function withPromiseApi(SessionState) {
  const proto = SessionState.prototype;
  if (typeof proto.recordAsync !== 'function') {
    proto.recordAsync = function recordAsync(input) {
      try {
        return Promise.resolve(this.record(input));
      } catch (err) {
        return Promise.reject(err);
      }
    };
    SessionState.standIn = true;
  }
  if (typeof proto.closeAsync !== 'function') {
    proto.closeAsync = function closeAsync() {
      this.close();
      return Promise.resolve();
    };
  }
  return SessionState;
};
