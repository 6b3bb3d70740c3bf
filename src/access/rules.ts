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
// - Rules decide who may pass once signed in; they never make a path need no sign-in. A rule
//   whose `allow` names anything makes its path need one even on an `auth: optional` upstream
//   (PathPolicy.needsSignIn): it would otherwise refuse signed-in users and pass anyone else. `auth`,
//   `publicPaths` and `allowPreflight` are decided first (decision.ts), so a public path stays public
//   inside a rule's path. A rule whose own path is public could never apply: config/cross-key-rules.ts
//   refuses it, as it refuses two rules with the same path (also the same once case and trailing
//   dots are folded, ambiguity.ts), a path outside the upstream's prefix, and rules on an upstream
//   with `auth: none`.
// - ambiguity.ts folds the rules' paths with the upstream's, so `/ADMIN/x` cannot reach a
//   case-insensitive upstream's admin pages under the upstream's laxer `allow`.

import type { AllowRules, UpstreamConfig } from '../options/types.js'
import { allowRestricts, createAllowPolicy, type AllowPolicy } from './allow.js'
import { routerPath, underPrefix } from './match.js'
import { stepUpRequirementOf, type StepUpRequirement } from '../oidc/step-up.js'
import { createPublicPathMatcher } from './public-paths.js'

/** The `allow` that decides a path: a rule's (`rule`: its index in `rules`), else the upstream's (`rule`: -1). */
export interface PathPolicy {
  policy: AllowPolicy
  rule: number
  /** The rule's path, for the log line of a refusal. */
  path?: string
  /** What the `allow` asks of the authentication (allow.acr, allow.maxAuthAgeSeconds); absent when nothing. */
  stepUp?: StepUpRequirement
  /**
   * The `allow` names anything (who may pass, or how they authenticated): only a signed-in user
   * can meet it, so the path needs a sign-in even on an `auth: optional` upstream (decision.ts).
   */
  needsSignIn: boolean
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

/** The compiled `allow`, with its step-up requirement only when it has one (the decision tests the property alone). */
function compile(allow: AllowRules, rule: number, path?: string): PathPolicy {
  const stepUp = stepUpRequirementOf(allow)
  const needsSignIn = allowRestricts(allow) || stepUp !== undefined
  return { policy: createAllowPolicy(allow), rule, needsSignIn, ...(path === undefined ? {} : { path }), ...(stepUp === undefined ? {} : { stepUp }) }
}

export function createPathPolicies(upstream: Pick<UpstreamConfig, 'allow' | 'rules'>): PathPolicies {
  const fallback: PathPolicy = compile(upstream.allow, -1)
  const rules = upstream.rules
  if (rules.length === 0) return () => fallback
  const compiled: PathPolicy[] = rules.map((rule: { path: string; allow: AllowRules }, index) => compile(rule.allow, index, rule.path))
  return (path) => {
    const index = ruleIndex(rules, path)
    return index === -1 ? fallback : (compiled[index] as PathPolicy)
  }
}

/**
 * What the step-up rule deciding `path` of `upstream` asks for, as the access decision would find
 * it (decision.ts): none on `auth: none` and public paths, which the decision passes before any rule.
 * For the redirect endpoint, which asks the provider for it when a sign-in returns there.
 */
export function createStepUpLookup(upstreams: readonly UpstreamConfig[]): (upstream: UpstreamConfig, path: string) => StepUpRequirement | undefined {
  const byUpstream = new Map(upstreams.map((u) => [u, { isPublic: createPublicPathMatcher(u.publicPaths), policyFor: createPathPolicies(u) }]))
  return (upstream, path) => {
    const compiled = byUpstream.get(upstream)
    if (compiled === undefined || upstream.auth === 'none' || compiled.isPublic(path)) return undefined
    return compiled.policyFor(path).stepUp
  }
}
