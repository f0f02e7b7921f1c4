/**
 * The ES module entry: the CommonJS entry's own objects, so that one `SessionState` and one
 * `SessionStateError` class serve both module systems and `instanceof` holds across them.
 * @packageDocumentation
 */
import cjs from './index.js'

export * from './index.js'
export default cjs
