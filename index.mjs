// The ES module entry: the same binding as the CommonJS loader (index.js), which picks the
// platform binary. Written by hand; the package test checks that both entries export the
// same names.
import binding from './index.js'

export const {
  SessionState,
  encodeNoticeContextKey,
  decodeNoticeContextKey,
  importStateDatabase,
  inspectDatabase,
  readEvents,
  EventKind,
  ActorType,
  Provenance,
  __napiBindingTarget,
} = binding

export default binding
