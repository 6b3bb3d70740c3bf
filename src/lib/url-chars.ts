// Character helpers shared by the parsers of untrusted URLs and names (the request path
// normalizer, the redirectAfter validator, the allow rules and the configuration).

export const SLASH = 0x2f
export const DOT = 0x2e
export const PERCENT = 0x25
export const QUESTION = 0x3f
export const HASH = 0x23
export const BACKSLASH = 0x5c
export const SEMICOLON = 0x3b

// -1 for a non-hex character, else its value; indexed by char code < 128.
export const HEX_VALUE = new Int8Array(128).fill(-1)
for (let c = 0; c < 10; c++) HEX_VALUE[0x30 + c] = c
for (let c = 0; c < 6; c++) {
  HEX_VALUE[0x41 + c] = 10 + c
  HEX_VALUE[0x61 + c] = 10 + c
}

/** The value of the hex digit at `s[i]`, or -1. */
export function hexValue(s: string, i: number): number {
  const c = s.charCodeAt(i)
  return c < 128 ? (HEX_VALUE[c] ?? -1) : -1
}

/** The byte of the `%XX` at i, or -1 when malformed. */
export function pctByte(s: string, i: number): number {
  if (i + 2 >= s.length) return -1
  const hi = hexValue(s, i + 1)
  const lo = hexValue(s, i + 2)
  return hi < 0 || lo < 0 ? -1 : (hi << 4) | lo
}

/**
 * True when the character at i, raw or once decoded, is a hex digit: after `%25` that spells a
 * second escape (`%252e`, and `%25%32%65`, which becomes `%252e` once `%32` and `%65` are decoded
 * as unreserved characters).
 */
export function hexDigitAt(s: string, i: number): boolean {
  if (s.charCodeAt(i) !== PERCENT) return hexValue(s, i) >= 0
  const b = pctByte(s, i)
  return b >= 0 && b < 0x80 && (HEX_VALUE[b] ?? -1) >= 0
}

const UPPER_ASCII = /[A-Z]/
const UPPER_ASCII_ALL = /[A-Z]/g

/** Lowercases A-Z only: Unicode lowercasing maps look-alikes such as KELVIN SIGN onto ASCII. */
export function asciiLower(s: string): string {
  return UPPER_ASCII.test(s) ? s.replace(UPPER_ASCII_ALL, (c) => String.fromCharCode(c.charCodeAt(0) | 0x20)) : s
}
