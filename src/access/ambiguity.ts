// The routing-ambiguity rule: a request must not reach a weaker upstream or rule by a spelling
// that another server reads as a stricter one. Paths are case-sensitive here (RFC 3986 6.2.2.1),
// but many upstreams are not: IIS and ASP.NET compare paths case-insensitively, and Windows drops
// trailing dots and spaces from every path segment, so to them `/ADMIN/x`, `/%41dmin/x` (which
// normalizePath decodes to `/Admin/x`), `/admin./x` and `/admin%20/x` are all `/admin/x`. Routed
// by their exact form they reached the `/` upstream, with `/`'s rules, while `/admin` (allow:
// groups admins) refused the same user. Rewriting them would guess which reading the upstream
// uses; refusing them (400) is right for both.
//
// The rule: fold the path (ASCII lowercase; trailing `.` and `%20` removed from every segment,
// segments left empty dropped) and fold the configuration the same way (prefixes, publicPaths
// globs, the paths of per-path `rules`; regular expressions are read without case). When the
// folded path reaches another upstream, another public/protected decision or another per-path
// rule than the exact path, for the request's method, the request is ambiguous. The proxy
// (before routing decides anything) and the check endpoints (for the request their caller names)
// both ask this one check.
//
// Cost: a path that folding does not change, with a configuration that folding does not change
// (no regular expression, whose folding cannot be told from its text), is answered by one regex
// test; otherwise one more matcher pass.
//
// This module also owns the load-time verdicts on `publicPaths` and `rules` entries that could
// never apply or would make the decision depend on how they are read (config/cross-key/upstreams.ts
// reports them with their keys): patternCoversPrefix and samePattern below.

import type { PathRule, PublicPath, UpstreamConfig } from '../options/types.js'
import { asciiLower } from '../lib/url-chars.js'
import { createUpstreamMatcher } from './match.js'
import { createPublicPathMatcher, type PublicPathMatcher } from './public-paths.js'
import { createRuleMatcher, type RuleMatcher } from './rules.js'
import { compilePathRegex, methodSet, methodsCover, methodsOverlap, type MethodSet } from './request-match.js'

/** `(host, path, method)`: canonical host, normalized path without the query, the request's method. True when ambiguous. */
export type RoutingAmbiguityCheck = (host: string, path: string, method?: string) => boolean

/** A path folding could change: an uppercase letter, or a segment ending in `.` or `%20`. */
const FOLDABLE = /[A-Z]|\.(?:\/|$)|%20(?:\/|$)/
const TRAILING_DOTS_AND_SPACES = /(?:\.|%20)+$/
/** Glob syntax: such a segment is only lowercased (a trailing `\.` must keep its escape). */
const GLOB_CHARS = /[*?[\]\\]/

function foldSegment(segment: string): string {
  return asciiLower(segment).replace(TRAILING_DOTS_AND_SPACES, '')
}

/** The path as a case-insensitive server that strips trailing dots and spaces would read it. */
export function foldPath(path: string): string {
  const segments = path.slice(1).split('/')
  const trailingSlash = segments.length > 1 && segments[segments.length - 1] === ''
  const kept = segments.map(foldSegment).filter((s) => s !== '')
  if (kept.length === 0) return '/'
  return '/' + kept.join('/') + (trailingSlash ? '/' : '')
}

function foldGlob(glob: string): string {
  return glob
    .split('/')
    .map((segment) => (segment === '**' ? segment : GLOB_CHARS.test(segment) ? asciiLower(segment) : foldSegment(segment)))
    .join('/')
}

interface Rules {
  upstream: UpstreamConfig
  isPublic: PublicPathMatcher
  /** The upstream's per-path rules, as written or folded; undefined without rules. */
  ruleFor: RuleMatcher | undefined
}

/** A publicPaths entry as a case-insensitive upstream reads it (its regex is compiled without case). */
function foldPublicPath(entry: PublicPath): PublicPath {
  if (typeof entry === 'string') return foldGlob(entry)
  return entry.glob === undefined ? entry : { ...entry, glob: foldGlob(entry.glob) }
}

function foldRule(rule: PathRule): PathRule {
  return rule.path === undefined ? rule : { ...rule, path: foldPath(rule.path) }
}

/** Whether folding changes an entry's reading: a regex always may. */
function foldingChanges(before: PublicPath | PathRule, after: PublicPath | PathRule): boolean {
  if (typeof before === 'string' || typeof after === 'string') return before !== after
  if (before.regex !== undefined) return true
  return ('glob' in before && 'glob' in after && before.glob !== after.glob) || ('path' in before && 'path' in after && before.path !== after.path)
}

export function createRoutingAmbiguityCheck(upstreams: readonly UpstreamConfig[]): RoutingAmbiguityCheck {
  const exact = new Map<UpstreamConfig, Rules>()
  const folded = new Map<UpstreamConfig, Rules>()
  let stable = true
  for (const upstream of upstreams) {
    const prefix = foldPath(upstream.match.pathPrefix)
    const entries = upstream.publicPaths.map(foldPublicPath)
    const rules = upstream.rules.map(foldRule)
    if (
      prefix !== upstream.match.pathPrefix ||
      entries.some((entry, i) => foldingChanges(upstream.publicPaths[i] as PublicPath, entry)) ||
      rules.some((rule, i) => foldingChanges(upstream.rules[i] as PathRule, rule))
    ) {
      stable = false
    }
    const some = upstream.rules.length > 0
    exact.set(upstream, { upstream, isPublic: createPublicPathMatcher(upstream.publicPaths), ruleFor: some ? createRuleMatcher(upstream.rules) : undefined })
    folded.set(
      { ...upstream, match: { ...upstream.match, pathPrefix: prefix } },
      {
        upstream,
        isPublic: createPublicPathMatcher(entries, { caseInsensitive: true }),
        ruleFor: some ? createRuleMatcher(rules, { caseInsensitive: true }) : undefined,
      },
    )
  }
  const matchExact = createUpstreamMatcher([...exact.keys()])
  const matchFolded = createUpstreamMatcher([...folded.keys()])

  return function isAmbiguous(host, path, method) {
    // Nothing to compare when folding changes neither the path nor the configuration.
    if (stable && !FOLDABLE.test(path)) return false
    const foldedPath = foldPath(path)
    const a = matchExact(host, path)
    const b = matchFolded(host, foldedPath)
    const aRules = a === undefined ? undefined : exact.get(a)
    const bRules = b === undefined ? undefined : folded.get(b)
    if (aRules?.upstream !== bRules?.upstream) return true
    if (aRules === undefined || bRules === undefined) return false
    if (aRules.isPublic(path, method) !== bRules.isPublic(foldedPath, method)) return true
    return aRules.ruleFor !== undefined && aRules.ruleFor(path, method) !== bRules.ruleFor?.(foldedPath, method)
  }
}

/**
 * Paths a pattern that covers everything below `prefix` matches: the prefix, its trailing slash,
 * and a few paths of one and more segments with every kind of character a normalized path has.
 * A pattern that matches all of them is taken to cover the prefix (a test, not a proof: it finds
 * `^/.*$`, `^.*$`, `^/app(?:/.*)?$` and their like, the catch-alls written by mistake).
 */
function probes(prefix: string): string[] {
  const base = prefix === '/' ? '' : prefix
  return [base === '' ? '/' : base, `${base}/`, `${base}/a`, `${base}/Z9/b.c`, `${base}/-._~!$&'()*+,=:@/%C3%A9%25/x/`, `${base}/${'q/'.repeat(20)}end.json`]
}

/**
 * Whether the regex `pattern` matches every probe path below `prefix` (an upstream's
 * match.pathPrefix, or a prefix rule's path): a public regex that does makes the whole upstream
 * public (that is `auth: none`), a regex rule that does leaves the prefix rule nothing to decide.
 * A pattern that does not compile covers nothing here (its own problem is reported where it is).
 */
export function patternCoversPrefix(pattern: string, prefix: string): boolean {
  let test: (path: string) => boolean
  try {
    test = compilePathRegex(pattern)
  } catch {
    return false
  }
  return probes(prefix).every(test)
}

/** An entry of publicPaths or rules, as the load-time verdicts compare them. */
export interface PatternEntry {
  glob?: string
  path?: string
  regex?: string
  methods?: readonly string[]
}

/**
 * The earlier entry of `entries` with the same glob, prefix or pattern as entry `index` for a
 * method in common, or -1: whichever of the two decides, the other one never does. Prefixes are
 * compared folded (`/Admin` and `/admin` are one path to a case-insensitive upstream); a glob or a
 * pattern as written. `rules`: entries are rules, where one naming methods decides before one for
 * every method at the same path (rules.ts), so only two for every method, or two naming a method
 * in common, are the same.
 */
export function samePatternAs(entries: readonly PatternEntry[], index: number, rules = false): number {
  const entry = entries[index] as PatternEntry
  const key = patternKey(entry)
  const methods = methodSet(entry.methods)
  for (let i = 0; i < index; i++) {
    const other = entries[i] as PatternEntry
    if (patternKey(other) !== key) continue
    const otherMethods = methodSet(other.methods)
    if (rules && (otherMethods === undefined) !== (methods === undefined)) continue
    if (methodsOverlap(otherMethods, methods)) return i
  }
  return -1
}

function patternKey(entry: PatternEntry): string {
  if (entry.regex !== undefined) return `r\0${entry.regex}`
  if (entry.path !== undefined) return `p\0${foldPath(entry.path)}`
  return `g\0${entry.glob ?? ''}`
}

/** Whether an entry for `outer` methods applies to every method an entry for `inner` ones does. */
export function coversMethods(outer: readonly string[] | undefined, inner: readonly string[] | undefined): boolean {
  return methodsCover(methodSet(outer), methodSet(inner))
}

export type { MethodSet }
