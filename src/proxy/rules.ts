// An upstream's per-path rules (`upstreams[].rules: [{ path, allow }]`): which `allow` decides a
// request, so that an admin-only part of an application needs no second upstream with the same
// target.
//
// Decisions:
// - A rule's `path` is a prefix, matched as `match.pathPrefix` is (match.ts): the path itself and
//   everything below it on a segment boundary (`/admin` covers `/admin` and `/admin/x`, never
//   `/administration`), compared as the router compares (decodeURI with `%25` kept), case-
//   sensitively. Prefixes rather than globs: of two prefixes that both cover a path the longer
//   one is always the more specific, so "the most specific rule" is never a matter of order;
//   two globs can overlap with neither more specific than the other.
// - The most specific (longest) rule covering the path decides alone: its `allow` replaces the
//   upstream's, it does not add to it. That is what a route's policy means to users of Pomerium
//   and of oauth2-proxy (one `--allowed-group` set per instance, hence per path), and it keeps
//   each path's policy readable in one place. A path no rule covers gets the upstream's `allow`.
// - Rules decide who may pass once signed in; they never make a path need no sign-in. `auth`,
//   `publicPaths` and `allowPreflight` are decided first (guard.ts), so a public path stays public
//   inside a rule's path. A rule whose own path is public could never apply: config/checks.ts
//   refuses it, as it refuses two rules with the same path (also the same once case and trailing
//   dots are folded, ambiguity.ts), a path outside the upstream's prefix, and rules on an upstream
//   with `auth: none`.
// - ambiguity.ts folds the rules' paths with the upstream's, so `/ADMIN/x` cannot reach a
//   case-insensitive upstream's admin pages under the upstream's laxer `allow`.

import type { AllowRules, UpstreamConfig } from '../options/types.js'
import { createAllowPolicy, type AllowPolicy } from './allow.js'
import { routerPath, underPrefix } from './match.js'

/** The `allow` that decides a path: a rule's (`rule`: its index in `rules`), else the upstream's (`rule`: -1). */
export interface PathPolicy {
  policy: AllowPolicy
  rule: number
  /** The rule's path, for the log line of a refusal. */
  path?: string
}

/** `path` is a normalized path without its query. */
export type PathPolicies = (path: string) => PathPolicy

/** The index in `rules` of the rule that decides `path`, or -1. Longest path first is the caller's order. */
export function ruleIndex(rules: ReadonlyArray<{ path: string }>, path: string): number {
  const routed = routerPath(path)
  if (routed === undefined) return -1
  let best = -1
  let bestLength = -1
  for (let i = 0; i < rules.length; i++) {
    const prefix = (rules[i] as { path: string }).path
    if (prefix.length > bestLength && underPrefix(prefix, routed)) {
      best = i
      bestLength = prefix.length
    }
  }
  return best
}

export function createPathPolicies(upstream: Pick<UpstreamConfig, 'allow' | 'rules'>): PathPolicies {
  const fallback: PathPolicy = { policy: createAllowPolicy(upstream.allow), rule: -1 }
  const rules = upstream.rules
  if (rules.length === 0) return () => fallback
  const compiled: PathPolicy[] = rules.map((rule: { path: string; allow: AllowRules }, index) => ({ policy: createAllowPolicy(rule.allow), rule: index, path: rule.path }))
  return (path) => {
    const index = ruleIndex(rules, path)
    return index === -1 ? fallback : (compiled[index] as PathPolicy)
  }
}
