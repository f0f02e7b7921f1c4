// Types of the ES module entry (index.mjs): the same API as the CommonJS entry.
import * as binding from './index.js'

export * from './index.js'
export default binding
