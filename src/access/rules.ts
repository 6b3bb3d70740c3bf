// An upstream's per-path rules (`upstreams[].rules: [{ path | regex, methods?, allow }]`): which
// `allow` decides a request, so that an admin-only part of an application needs no second upstream
// with the same target.
//
// Decisions:
// - A rule's `path` is a prefix, matched as `match.pathPrefix` is (match.ts): the path itself and
//   everything below it on a segment boundary (`/admin` covers `/admin` and `/admin/x`, never
//   `/administration`), compared as the router compares (decodeURI with `%25` kept), case-
//   sensitively. Of two prefixes that both cover a path the longer one is always the more specific,
//   so among prefix rules "the most specific rule" is never a matter of the order they are written in.
// - A rule's `regex` is an anchored RE2 pattern matched against the whole normalized path
//   (request-match.ts). Two regular expressions can overlap with neither more specific, so regex
//   rules are tried in the order written and the first that matches decides, before any prefix
//   rule: the order nginx gives its `location` blocks (ngx_http_core_module, `location`: "the
//   location with the longest matching prefix is selected and remembered. Then regular
//   expressions are checked, in the order of their appearance in the configuration file. The
//   search of regular expressions terminates on the first match ... If no match with a regular
//   expression is found then the configuration of the prefix location remembered earlier is
//   used"). A regex rule is the exception written for what a prefix cannot say.
// - `methods` limits a rule to those methods (request-match.ts: compared without case, GET with
//   HEAD); for any other method the rule is not there. At the same prefix, a rule that lists the
//   request's method decides before one for every method (`/api` for GET with `allow: {}` beside
//   `/api` for writers).
// - The deciding rule's `allow` replaces the upstream's, it does not add to it. That is what a
//   route's policy means to users of Pomerium and of oauth2-proxy (one `--allowed-group` set per
//   instance, hence per path), and it keeps each path's policy readable in one place. A request no
//   rule matches gets the upstream's `allow`.
// - Rules decide who may pass once signed in; they never make a path need no sign-in. A rule
//   whose `allow` names anything makes its path need one even on an `auth: optional` upstream
//   (PathPolicy.needsSignIn): it would otherwise refuse signed-in users and pass anyone else. `auth`,
//   `publicPaths` and `allowPreflight` are decided first (decision.ts), so a public path stays public
//   inside a rule's path. What could never apply, or would be ambiguous, is refused at load
//   (config/cross-key/upstreams.ts with ambiguity.ts's verdicts): a rule whose own path is public,
//   two rules with the same path or pattern for a method in common (paths also once case and
//   trailing dots are folded), a prefix rule a regex rule covers, a path outside the upstream's
//   prefix, and rules on an upstream with `auth: none`.
// - ambiguity.ts folds the rules' paths (and reads their patterns without case) as it folds the
//   upstream's, so `/ADMIN/x` cannot reach a case-insensitive upstream's admin pages under the
//   upstream's laxer `allow`.

import type { AllowRules, PathRule, UpstreamConfig } from '../options/types.js'
import { allowRestricts, createAllowPolicy, type AllowPolicy } from './allow.js'
import { routerPath, underPrefix } from './match.js'
import { stepUpRequirementOf, type StepUpRequirement } from '../oidc/step-up.js'
import { createPublicPathMatcher } from './public-paths.js'
import { appliesTo, compilePathRegex, methodSet, type MethodSet, type PathPattern } from './request-match.js'

/** The `allow` that decides a path: a rule's (`rule`: its index in `rules`), else the upstream's (`rule`: -1). */
export interface PathPolicy {
  policy: AllowPolicy
  rule: number
  /** The rule's path, for the log line of a refusal. */
  path?: string
  /** The rule's pattern: a refusal names the path it refused (the client's own), not the pattern. */
  regex?: string
  /** What the `allow` asks of the authentication (allow.acr, allow.maxAuthAgeSeconds); absent when nothing. */
  stepUp?: StepUpRequirement
  /**
   * The `allow` names anything (who may pass, or how they authenticated): only a signed-in user
   * can meet it, so the path needs a sign-in even on an `auth: optional` upstream (decision.ts).
   */
  needsSignIn: boolean
}

/** `path` is a normalized path without its query; `method` the request's (absent: only rules for every method apply). */
export type PathPolicies = (path: string, method?: string) => PathPolicy

/** What selects a rule. */
export type RuleSelector = Pick<PathRule, 'path' | 'regex' | 'methods'>

/** The index in `rules` of the rule that decides a request, or -1. */
export type RuleMatcher = (path: string, method?: string) => number

/**
 * The rule matcher of `rules`: regex rules in the order written, the first match deciding, then
 * the longest prefix (at the same prefix, a rule naming the method first). `caseInsensitive`:
 * patterns read as a case-insensitive upstream reads them (ambiguity.ts, which folds the prefixes
 * itself). Throws TypeError for a pattern request-match.ts refuses.
 */
export function createRuleMatcher(rules: readonly RuleSelector[], options: { caseInsensitive?: boolean } = {}): RuleMatcher {
  const patterns: Array<{ index: number; test: PathPattern; methods: MethodSet }> = []
  const prefixes: Array<{ index: number; prefix: string; methods: MethodSet }> = []
  rules.forEach((rule, index) => {
    const methods = methodSet(rule.methods)
    if (rule.regex !== undefined) patterns.push({ index, test: compilePathRegex(rule.regex, options.caseInsensitive === true), methods })
    else if (rule.path !== undefined) prefixes.push({ index, prefix: rule.path, methods })
  })
  return (path, method) => {
    for (const rule of patterns) {
      if (appliesTo(rule.methods, method) && rule.test(path)) return rule.index
    }
    if (prefixes.length === 0) return -1
    const routed = routerPath(path)
    if (routed === undefined) return -1
    let best = -1
    let bestLength = -1
    let bestForMethod = false
    for (const rule of prefixes) {
      if (!appliesTo(rule.methods, method) || !underPrefix(rule.prefix, routed)) continue
      const forMethod = rule.methods !== undefined
      if (rule.prefix.length > bestLength || (rule.prefix.length === bestLength && forMethod && !bestForMethod)) {
        best = rule.index
        bestLength = rule.prefix.length
        bestForMethod = forMethod
      }
    }
    return best
  }
}

/** The compiled `allow`, with its step-up requirement only when it has one (the decision tests the property alone). */
function compile(allow: AllowRules, rule: number, at: { path?: string; regex?: string } = {}): PathPolicy {
  const stepUp = stepUpRequirementOf(allow)
  const needsSignIn = allowRestricts(allow) || stepUp !== undefined
  return {
    policy: createAllowPolicy(allow),
    rule,
    needsSignIn,
    ...(at.path === undefined ? {} : { path: at.path }),
    ...(at.regex === undefined ? {} : { regex: at.regex }),
    ...(stepUp === undefined ? {} : { stepUp }),
  }
}

export function createPathPolicies(upstream: Pick<UpstreamConfig, 'allow' | 'rules'>): PathPolicies {
  const fallback: PathPolicy = compile(upstream.allow, -1)
  const rules = upstream.rules
  if (rules.length === 0) return () => fallback
  const compiled: PathPolicy[] = rules.map((rule, index) => compile(rule.allow, index, rule))
  const ruleFor = createRuleMatcher(rules)
  return (path, method) => {
    const index = ruleFor(path, method)
    return index === -1 ? fallback : (compiled[index] as PathPolicy)
  }
}

/**
 * What the step-up rule deciding `path` of `upstream` asks for, as the access decision would find
 * it (decision.ts): none on `auth: none` and public paths, which the decision passes before any rule.
 * For the redirect endpoint, which asks the provider for it when a sign-in returns there: a
 * browser comes back with GET.
 */
export function createStepUpLookup(upstreams: readonly UpstreamConfig[]): (upstream: UpstreamConfig, path: string) => StepUpRequirement | undefined {
  const byUpstream = new Map(upstreams.map((u) => [u, { isPublic: createPublicPathMatcher(u.publicPaths), policyFor: createPathPolicies(u) }]))
  return (upstream, path) => {
    const compiled = byUpstream.get(upstream)
    if (compiled === undefined || upstream.auth === 'none' || compiled.isPublic(path, 'GET')) return undefined
    return compiled.policyFor(path, 'GET').stepUp
  }
}
