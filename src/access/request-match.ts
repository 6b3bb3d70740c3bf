// What `publicPaths` and `rules` entries match besides a glob or a prefix: an anchored regular
// expression over the normalized path, and a list of methods.
//
// Regular expressions run on every request against an attacker-chosen path, so they are compiled
// by re2js (a JavaScript port of RE2, MIT, no dependencies and no install scripts), whose
// automata match in time linear in the path whatever the pattern: RE2's guarantee, "a regular
// expression engine that provides linear time matching" (re2js README; RE2's Syntax wiki lists
// what it leaves out for that). V8's own RegExp backtracks (measured on Node 24: `^(a+)+$` against
// 26 `a` and a `b` takes 0.5 s, twice as long with each more `a`), and its linear engine
// (`--enable-experimental-regexp-engine`, the `l` flag) is an experimental V8 flag, off in Node,
// that a gateway cannot switch on for itself (nor rely on across Node releases); the native `re2`
// package needs a compiler or a prebuilt download at install. What RE2 cannot run in linear time
// it refuses to compile: backreferences (`\1`), lookahead and lookbehind (`(?=`, `(?!`, `(?<=`),
// possessive and nested quantifiers (`a++`), `\C`, and repetition counts above 1000; the syntax
// is Go's `regexp`, which oauth2-proxy's `--skip-auth-route` and `--skip-auth-regex` use, so
// their patterns compile unchanged. On top of what RE2 refuses, refused here (regexProblem):
// - a pattern that is not written `^...$`: oauth2-proxy searches (`regexp.MatchString`, no
//   implicit anchors), so its `^/api` also matches `/api-internal` and `/public` matches
//   `/admin/public`; here a pattern always matches the whole path (re2js testExact), and a pattern
//   must say so, so that it reads as it matches;
// - a `|` outside parentheses (`^/a|/b$` would read as "starts with /a or ends with /b"; write
//   `^(?:/a|/b)$`);
// - non-ASCII characters and `\p{...}` classes: the path is the normalized one (access/path.ts),
//   which is ASCII with everything else percent-encoded in uppercase hex (`/caf%C3%A9`), so they
//   could never match; Unicode classes are also what makes an RE2 program large (the path's
//   percent-encoded sub-delims, `:` and `@` are read decoded, asPatternsRead);
// - counted repetitions above 100 and patterns over 1000 characters: linear in the path, RE2's cost
//   is also proportional to the compiled program; with these bounds the worst pattern measured costs
//   a few milliseconds on a 32 KB path.
//
// Methods (RFC 9110 9.1): uppercase tokens in the configuration. A request's method is compared
// without case: the method token is case-sensitive, but frameworks such as Symfony uppercase it,
// so `delete` named by an ingress must not dodge a rule for `DELETE`. GET also covers HEAD
// (RFC 9110 9.3.2: HEAD is GET without the content, and servers answer it with their GET handler),
// so a rule for GET cannot be dodged with HEAD.

import { RE2JS } from 're2js'

/** The longest pattern accepted, in characters. */
export const MAX_PATTERN_LENGTH = 1000
/** The largest count of a counted repetition (`{n}`, `{n,m}`). */
export const MAX_REPEAT = 100

/** A compiled path pattern: whether it matches a whole normalized path. */
export type PathPattern = (normalizedPath: string) => boolean

const COUNTED = /\{(\d*)(?:,(\d*))?\}/g

/** Why `pattern` is refused as a path regex (see the top of this module), or undefined. */
export function regexProblem(pattern: string): string | undefined {
  const quoted = JSON.stringify(pattern)
  if (pattern.length > MAX_PATTERN_LENGTH) return `${quoted.slice(0, 40)}...: longer than ${MAX_PATTERN_LENGTH} characters`

  if (!/^[\x20-\x7e]*$/.test(pattern)) return `${quoted}: only printable ASCII (the path is matched percent-encoded: write /caf%C3%A9, not /café)`
  if (!pattern.startsWith('^') || !endsWithAnchor(pattern)) return `${quoted}: must be anchored, written ^...$ (it matches the whole path)`
  if (hasTopLevelAlternation(pattern)) return `${quoted}: a | outside parentheses: write ^(?:a|b)$`
  for (const [, low, high] of pattern.matchAll(COUNTED)) {
    if (Number(low ?? 0) > MAX_REPEAT || Number(high ?? 0) > MAX_REPEAT) return `${quoted}: repetition counts above ${MAX_REPEAT}`
  }
  try {
    RE2JS.compile(pattern, RE2JS.DISABLE_UNICODE_GROUPS)
  } catch (error) {
    return `${quoted}: ${engineRefusal(error instanceof Error ? error.message : String(error))}`
  }
  return undefined
}

/** RE2's message, with why for what it refuses by design. */
function engineRefusal(message: string): string {
  const detail = message.replace(/^error parsing regexp: /, '')
  if (/`\\[1-9]/.test(detail)) return `backreferences are not supported by a linear-time engine (${detail})`
  if (/`\(\?[=!<]/.test(detail)) return `lookahead and lookbehind are not supported by a linear-time engine (${detail})`
  if (/\\p|\\P|unicode/i.test(detail)) return `Unicode classes are refused: the path is ASCII (${detail})`
  return `not a valid RE2 regular expression: ${detail}`
}

/** Whether the pattern ends with an unescaped `$`. */
export function endsWithAnchor(pattern: string): boolean {
  if (!pattern.endsWith('$')) return false
  let backslashes = 0
  for (let i = pattern.length - 2; i >= 0 && pattern.charCodeAt(i) === 0x5c; i--) backslashes++
  return backslashes % 2 === 0
}

/** A `|` outside every group and character class. */
export function hasTopLevelAlternation(pattern: string): boolean {
  let depth = 0
  let inClass = false
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]
    if (c === '\\') {
      i++
    } else if (inClass) {
      if (c === ']') inClass = false
    } else if (c === '[') {
      inClass = true
      // `[]a]` and `[^]a]`: a `]` first in a class is literal.
      if (pattern[i + 1] === '^') i++
      if (pattern[i + 1] === ']') i++
    } else if (c === '(') {
      depth++
    } else if (c === ')') {
      depth--
    } else if (c === '|' && depth === 0) {
      return true
    }
  }
  return false
}

/**
 * The pattern compiled, matching the whole path. `caseInsensitive`: as a case-insensitive upstream
 * would read it (ambiguity.ts). Throws TypeError naming the pattern when regexProblem refuses it.
 */
export function compilePathRegex(pattern: string, caseInsensitive = false): PathPattern {
  const problem = regexProblem(pattern)
  if (problem !== undefined) throw new TypeError(`regex ${problem}`)
  const re = RE2JS.compile(pattern, RE2JS.DISABLE_UNICODE_GROUPS | (caseInsensitive ? RE2JS.CASE_INSENSITIVE : 0))
  return (path) => re.testExact(asPatternsRead(path))
}

/**
 * The percent-encodings of characters a path also carries as themselves: RFC 3986's sub-delims
 * and `:` and `@` (`;` is refused before, access/path.ts). normalizePath keeps them encoded (RFC
 * 3986 6.2.2.2 decodes only unreserved characters), yet an application decodes `%3A` to `:`, so
 * a pattern written for `/items/1:purge` must also see `/items/1%3Apurge` as that: a rule would
 * otherwise be dodged by encoding one character. Either case: normalizePath uppercases hex, the
 * folded path of ambiguity.ts lowercases it.
 */
const ENCODED_PATH_CHARACTER = /%(?:2[146-9A-C]|3[AD]|40)/gi

/** The normalized path as patterns read it: those characters decoded, everything else as is. */
export function asPatternsRead(path: string): string {
  if (!path.includes('%')) return path
  return path.replace(ENCODED_PATH_CHARACTER, (encoded) => String.fromCharCode(parseInt(encoded.slice(1), 16)))
}

/** The methods an entry applies to, or undefined for every method. */
export type MethodSet = ReadonlySet<string> | undefined

/** `methods` as a set, with HEAD wherever GET is. */
export function methodSet(methods: readonly string[] | undefined): MethodSet {
  if (methods === undefined) return undefined
  const set = new Set(methods)
  if (set.has('GET')) set.add('HEAD')
  return set
}

/**
 * Whether an entry with `methods` applies to a request's `method` (compared without case).
 * Without a method (a lookup that knows none) only an entry for every method applies.
 */
export function appliesTo(methods: MethodSet, method: string | undefined): boolean {
  if (methods === undefined) return true
  return method !== undefined && methods.has(method.toUpperCase())
}

/** Whether two entries apply to some method in common. */
export function methodsOverlap(a: MethodSet, b: MethodSet): boolean {
  if (a === undefined || b === undefined) return true
  for (const method of a) if (b.has(method)) return true
  return false
}

/** Whether every method `inner` applies to, `outer` applies to as well. */
export function methodsCover(outer: MethodSet, inner: MethodSet): boolean {
  if (outer === undefined) return true
  if (inner === undefined) return false
  for (const method of inner) if (!outer.has(method)) return false
  return true
}
