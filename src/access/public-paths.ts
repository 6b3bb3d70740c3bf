// Matching of an upstream's `publicPaths` globs (paths that skip the sign-in check).
//
// Globs are matched against the output of normalizePath: the path only, never the query
// (oauth2-proxy matched `--skip-auth-route` against path and query, so `?/public` appended to any
// URL could skip auth; see the maintainers' concern in oauth2-proxy/oauth2-proxy#2029).
//
// Syntax: `/` separates segments; `**` as a whole segment matches zero or more segments; `*`
// matches within one segment (at least one character); `?` one character; `[...]` a character
// class; `\` escapes. Decided:
// - `/public/**` matches `/public` and `/public/` as well as everything below: what a user writing
//   it means, and what picomatch does.
// - `/public/*` matches one non-empty segment below `/public`: not `/public`, `/public/`,
//   `/public/a/b`, nor `/public/a/` (a trailing slash is a segment of its own; picomatch is
//   inconsistent there, and a stricter match only means a sign-in is asked for).
// - `**` is zero or more segments wherever it stands, so `/**/favicon.ico` also matches
//   `/favicon.ico` (as in gitignore; picomatch does this for `/a/**/b` and `/a/b` but not for a
//   leading `/**/`).
//
// Why not one picomatch regex per glob: picomatch compiles `**` and `*` into nested lazy
// quantifiers, and V8 backtracks on them super-linearly. Measured on picomatch 4.0.7:
// `/a/**/b/**/c/**/d/**/e` against a 4 KB path did not finish in 20 s, and `*a*a*b` against a
// 2000-character segment took 3.4 s. The path is attacker-controlled and this runs on every
// proxied request, so:
// - `**` segments are matched here, with the linear-time greedy wildcard algorithm over segments
//   (at most globSegments x pathSegments segment tests);
// - other segments are literal string compares, or a picomatch regex for that one segment, which
//   contains at most one run of `*` (a single lazy quantifier: linear per attempt). A segment
//   with two or more `*` runs throws at construction.
// - picomatch passes regex syntax through even with extglobs and braces off: `(a|aa)+b`,
//   `[a-z]+` and `a{2}` compile to real groups and quantifiers (nested ones backtrack
//   exponentially). So a segment with wildcards may only contain letters, digits,
//   `-._~%:=,$&'`, `*`, `?`, `[...]` classes (`[^...]` to negate) and `\`-escaped characters;
//   anything else throws at construction. Segments without wildcards are compared as plain
//   strings and may contain any character.
//
// picomatch options for those segment regexes, each closing a way a glob could match more than
// its author read it to:
// - dot: true        `*` also matches names starting with `.` (`/public/**` covers
//                    `/public/.well-known/x`): a public tree is public, dotfiles included.
// - nobrace: true    `{a,b}` is literal; brace expansion (and `{1..1000}` ranges) is not needed.
// - noextglob: true  `@(a|b)`, `!(x)`, `+(x)` are literal; `!(admin)` would make every name but
//                    one public.
// - nonegate: true   a leading `!` is literal, never "everything except".
// - windows: false   `\` never separates, whatever the OS (normalizePath refuses `\` anyway).
// - nocase: false    paths are case-sensitive (RFC 3986 6.2.2.1); a case-insensitive upstream
//                    only sees `/PUBLIC/x` as the protected path it is here.
//
// Every glob must start with `/`: one without could never match a normalized path, so it is a
// configuration mistake and throws rather than silently protecting nothing.
//
// An entry may also be an object: `{ glob }` or `{ regex }` (an anchored RE2 pattern matched
// against the same normalized path, request-match.ts), with `methods` to make it public for those
// methods only (GET includes HEAD). A request is public when any entry applying to its method
// matches: entries only ever add public paths, so their order plays no part.

import picomatch from 'picomatch'
import type { PublicPath } from '../options/types.js'
import { appliesTo, compilePathRegex, methodSet, type MethodSet, type PathPattern } from './request-match.js'

/**
 * Whether a normalized path is public for a method. Without a method (a lookup that knows none)
 * only the entries for every method count.
 */
export type PublicPathMatcher = (normalizedPath: string, method?: string) => boolean

const PICOMATCH_OPTIONS: picomatch.PicomatchOptions = {
  dot: true,
  nobrace: true,
  noextglob: true,
  nonegate: true,
  windows: false,
  nocase: false,
}

/** Whitespace and controls: a URL parser would drop or re-encode them, so the glob would never match as written. */
const INVISIBLE = /[\s\x00-\x1f\x7f]/

const GLOBSTAR = 0
type SegmentMatcher = typeof GLOBSTAR | string | RegExp

const NEVER: PublicPathMatcher = () => false

// A segment with none of these is a plain string: `{a,b}`, `!(x)`, `@(a|b)`, `+(x)` included
// (braces, extglobs and negation are off, so they are literal to picomatch as well).
const GLOB_CHARS = /[*?[\]\\]/
// The whole syntax allowed in a wildcard segment: safe characters, `*`, `?`, classes, escapes.
const SAFE_WILDCARD_SEGMENT = /^(?:[A-Za-z0-9\-._~%:=,$&'*?\]]|\[\^?|\\.)+$/

function starRuns(segment: string): number {
  let runs = 0
  for (let i = 0; i < segment.length; i++) {
    const c = segment.charCodeAt(i)
    if (c === 0x5c)
      i++ // `\x` is a literal x
    else if (c === 0x2a && segment.charCodeAt(i - 1) !== 0x2a) runs++
  }
  return runs
}

/** Why `glob` is not a supported public-path glob, or `undefined`; config validation asks too. */
/**
 * Why a glob is refused, or undefined. `strictBrackets` (the configuration's check) also refuses
 * an unbalanced bracket, which the matcher would read as a literal character.
 */
export function globProblem(glob: string, strictBrackets = true): string | undefined {
  if (glob.charCodeAt(0) !== 0x2f) return 'must start with /'
  if (INVISIBLE.test(glob)) return 'must not contain whitespace or control characters'
  if (glob.includes('#')) return 'must not contain #'
  for (const segment of glob.slice(1).split('/')) {
    if (segment === '**' || !GLOB_CHARS.test(segment)) continue
    if (!SAFE_WILDCARD_SEGMENT.test(segment)) {
      return "a segment with wildcards may only use letters, digits, -._~%:=,$&', *, ?, [...] and \\-escapes"
    }
    if (starRuns(segment) > 1) return 'at most one "*" per segment (use "**" for several segments)'
    if (!strictBrackets) continue
    try {
      // strictBrackets reports an unbalanced bracket instead of reading it as a literal; picomatch
      // answers a pattern it cannot compile with a regex that matches nothing.
      if (picomatch.makeRe(segment, { ...PICOMATCH_OPTIONS, strictBrackets: true }).source === '$^') return 'is not a valid glob'
    } catch (error) {
      return `is not a valid glob: ${error instanceof Error ? error.message : String(error)}`
    }
  }
  return undefined
}

function compileGlob(glob: string): SegmentMatcher[] {
  const problem = globProblem(glob, false)
  if (problem !== undefined) throw new TypeError(`publicPaths: ${JSON.stringify(glob)}: ${problem}`)
  const out: SegmentMatcher[] = []
  for (const segment of glob.slice(1).split('/')) {
    if (segment === '**') {
      // `/**/**` is the same as `/**`.
      if (out[out.length - 1] !== GLOBSTAR) out.push(GLOBSTAR)
    } else if (!GLOB_CHARS.test(segment)) {
      out.push(segment)
    } else {
      out.push(picomatch.makeRe(segment, PICOMATCH_OPTIONS))
    }
  }
  return out
}

function segmentEnd(path: string, start: number): number {
  const i = path.indexOf('/', start)
  return i === -1 ? path.length : i
}

/**
 * Greedy wildcard matching where the "characters" are path segments and GLOBSTAR is the star:
 * on a mismatch, backtrack to the last GLOBSTAR and let it absorb one more segment. Correct
 * because a GLOBSTAR matches any sequence of segments; O(glob segments x path segments) tests.
 */
function matches(glob: readonly SegmentMatcher[], path: string): boolean {
  const n = glob.length
  const len = path.length
  let gi = 0
  let p = 1 // start of the current segment; path[0] is '/'
  let starGi = -1
  let starP = 0
  while (p <= len) {
    const end = segmentEnd(path, p)
    if (gi < n) {
      const g = glob[gi]
      if (g === GLOBSTAR) {
        starGi = gi
        starP = p
        gi++
        continue
      }
      const ok = typeof g === 'string' ? end - p === g.length && path.startsWith(g, p) : g !== undefined && g.test(path.slice(p, end))
      if (ok) {
        gi++
        p = end + 1
        continue
      }
    }
    if (starGi === -1) return false
    gi = starGi + 1
    starP = segmentEnd(path, starP) + 1
    p = starP
  }
  while (gi < n && glob[gi] === GLOBSTAR) gi++
  return gi === n
}

interface CompiledEntry {
  glob?: SegmentMatcher[]
  regex?: PathPattern
  methods: MethodSet
}

/** An entry's glob or regex as written (the object form's, or the string itself). */
export function publicPathPattern(entry: PublicPath): { glob?: string; regex?: string } {
  if (typeof entry === 'string') return { glob: entry }
  return entry.regex === undefined ? { glob: entry.glob ?? '' } : { regex: entry.regex }
}

/** An entry compiled; `caseInsensitive` compiles a regex as a case-insensitive upstream reads it (ambiguity.ts). */
function compileEntry(entry: PublicPath, caseInsensitive: boolean): CompiledEntry {
  const methods = methodSet(typeof entry === 'string' ? undefined : entry.methods)
  const { glob, regex } = publicPathPattern(entry)
  if (regex !== undefined) {
    try {
      return { regex: compilePathRegex(regex, caseInsensitive), methods }
    } catch (error) {
      throw new TypeError(`publicPaths: ${(error as Error).message}`, { cause: error })
    }
  }
  return { glob: compileGlob(glob ?? ''), methods }
}

export function createPublicPathMatcher(entries: readonly PublicPath[], options: { caseInsensitive?: boolean } = {}): PublicPathMatcher {
  if (entries.length === 0) return NEVER
  const compiled = entries.map((entry) => compileEntry(entry, options.caseInsensitive === true))
  return (normalizedPath, method) => {
    // A `?` can only be here if the caller passed path and query: fail closed rather than let
    // the query decide (the oauth2-proxy skip-auth-route mistake above).
    if (normalizedPath.charCodeAt(0) !== 0x2f || normalizedPath.includes('?')) return false
    for (const entry of compiled) {
      if (!appliesTo(entry.methods, method)) continue
      if (entry.regex !== undefined ? entry.regex(normalizedPath) : matches(entry.glob as SegmentMatcher[], normalizedPath)) return true
    }
    return false
  }
}
