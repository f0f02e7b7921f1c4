/**
 * The ES module entry of `session-awareness/openclaw`: the CommonJS entry's own functions, so
 * both module systems share one configured store.
 * @packageDocumentation
 */
import cjs from './index.js'

export * from './index.js'
export default cjs
