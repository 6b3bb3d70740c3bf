// Character codes and the hex digit table shared by the two parsers of untrusted URLs
// (the request path normalizer and the redirectAfter validator).

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
