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
// globs, the paths of per-path `rules`). When the folded path reaches another upstream, another
// public/protected decision or another per-path rule than the exact path, the request is
// ambiguous. The proxy (app.ts, before routing decides
// anything) and forward-auth (for the request its caller names) both ask this one check.
//
// Cost: a path that folding does not change, with a configuration that folding does not change,
// is answered by one regex test; otherwise one more matcher pass.

import type { UpstreamConfig } from '../options/types.js'
import { asciiLower } from '../lib/url-chars.js'
import { createUpstreamMatcher } from './match.js'
import { createPublicPathMatcher, type PublicPathMatcher } from './public-paths.js'
import { ruleIndex } from './rules.js'

/** `(host, path)`: canonical host, normalized path without the query. True when ambiguous. */
export type RoutingAmbiguityCheck = (host: string, path: string) => boolean

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
  /** The paths of the upstream's per-path rules, as written or folded. */
  rulePaths: Array<{ path: string }>
}

export function createRoutingAmbiguityCheck(upstreams: readonly UpstreamConfig[]): RoutingAmbiguityCheck {
  const exact = new Map<UpstreamConfig, Rules>()
  const folded = new Map<UpstreamConfig, Rules>()
  let stable = true
  for (const upstream of upstreams) {
    const prefix = foldPath(upstream.match.pathPrefix)
    const globs = upstream.publicPaths.map(foldGlob)
    const rulePaths = upstream.rules.map((rule) => ({ path: rule.path }))
    const foldedRulePaths = rulePaths.map((rule) => ({ path: foldPath(rule.path) }))
    if (
      prefix !== upstream.match.pathPrefix ||
      globs.some((g, i) => g !== upstream.publicPaths[i]) ||
      foldedRulePaths.some((r, i) => r.path !== rulePaths[i]?.path)
    ) {
      stable = false
    }
    const rules = { upstream, isPublic: createPublicPathMatcher(upstream.publicPaths), rulePaths }
    exact.set(upstream, rules)
    folded.set(
      { ...upstream, match: { ...upstream.match, pathPrefix: prefix } },
      { upstream, isPublic: createPublicPathMatcher(globs), rulePaths: foldedRulePaths },
    )
  }
  const matchExact = createUpstreamMatcher([...exact.keys()])
  const matchFolded = createUpstreamMatcher([...folded.keys()])

  return function isAmbiguous(host, path) {
    // Nothing to compare when folding changes neither the path nor the configuration.
    if (stable && !FOLDABLE.test(path)) return false
    const foldedPath = foldPath(path)
    const a = matchExact(host, path)
    const b = matchFolded(host, foldedPath)
    const aRules = a === undefined ? undefined : exact.get(a)
    const bRules = b === undefined ? undefined : folded.get(b)
    if (aRules?.upstream !== bRules?.upstream) return true
    if (aRules === undefined || bRules === undefined) return false
    if (aRules.isPublic(path) !== bRules.isPublic(foldedPath)) return true
    return aRules.rulePaths.length > 0 && ruleIndex(aRules.rulePaths, path) !== ruleIndex(bRules.rulePaths, foldedPath)
  }
}
