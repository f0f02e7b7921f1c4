// Notice context keys (semantics.md#cursors): `session-state:` + lowercase hex of the target's UTF-8 bytes, and
// a strict decoder that refuses anything the encoder would not produce.
import { decodeNoticeContextKey, encodeNoticeContextKey } from './helpers'

describe('encodeNoticeContextKey', () => {
  test.each([
    ['ab', 'session-state:6162'],
    ['agent:main:x', 'session-state:6167656e743a6d61696e3a78'],
    ['é', 'session-state:c3a9'],
    ['😀', 'session-state:f09f9880'],
    ['\ufeffx', 'session-state:efbbbf78'],
    ['a"\n', 'session-state:61220a'],
    ['', 'session-state:'],
  ])('%p -> %p', (key, encoded) => {
    expect(encodeNoticeContextKey(key)).toBe(encoded)
  })
})

describe('decodeNoticeContextKey', () => {
  test.each(['agent:main:subagent:child', 'é😀', '\ufeffx', '\ufeff', 'a"\n\u2028', 'x'.repeat(500)])(
    'round-trips %p',
    (key) => {
      expect(decodeNoticeContextKey(encodeNoticeContextKey(key))).toBe(key)
    },
  )

  test('a leading U+FEFF is kept, not stripped', () => {
    const decoded = decodeNoticeContextKey('session-state:efbbbf78')
    expect(decoded).toBe('\ufeffx')
    expect(decoded?.length).toBe(2)
  })

  test.each([
    ['the bare prefix', 'session-state:'],
    ['odd length', 'session-state:616'],
    ['uppercase hex', 'session-state:6A'],
    ['mixed-case hex', 'session-state:6a6B'],
    ['non-hex digits', 'session-state:zz'],
    ['a sign', 'session-state:+61'],
    ['invalid UTF-8', 'session-state:ff'],
    ['a lone continuation byte', 'session-state:80'],
    ['a truncated sequence', 'session-state:c3'],
    ['an encoded surrogate', 'session-state:eda080'],
    ['an overlong encoding', 'session-state:c0af'],
    ['another prefix', 'state:6162'],
    ['a capitalised prefix', 'Session-state:6162'],
    ['a missing colon', 'session-state6162'],
    ['a trailing space', 'session-state:6162 '],
    ['a leading space', ' session-state:6162'],
    ['whitespace inside', 'session-state:61 62'],
    ['the empty string', ''],
    ['no prefix at all', '6162'],
  ])('refuses %s', (_what, contextKey) => {
    expect(decodeNoticeContextKey(contextKey)).toBeNull()
  })
})
