// An upstream's `allow` rules: which signed-in users may reach it.
//
// All given kinds must pass (AND across kinds), any entry of a kind suffices (OR within a kind).
// Decisions:
// - Empty rules (`{}`), and kinds given as empty lists or an empty `claims` object, do not
//   restrict: a config loader filling in `emails: []` must not lock everyone out. A named claim
//   with an empty list of accepted values (`claims: {role: []}`) can never pass: the operator
//   asked for that claim, and no value satisfies it.
// - Only the `email` claim (a non-empty string) is used for `emails` and `emailDomains`, and only
//   when `email_verified` is the boolean true or the string "true" (AWS Cognito sends strings),
//   or absent. Anything else (false, "false", "False", 0, "no", null, an object) means
//   unverified and never matches: at many providers anyone can sign up with any address, and an
//   unverified `ceo@corp.com` is attacker-chosen (the "nOAuth" class of account takeover). A
//   value that is not clearly "verified" is not taken as verified. An absent `email_verified` is
//   accepted, because several providers (Azure AD / Entra) never send it.
// - Case-insensitivity is ASCII-only (A-Z): Unicode lowercasing maps look-alikes onto ASCII
//   (`'\u212Aate'.toLowerCase()` is `'kate'`, KELVIN SIGN), which would let a different mailbox
//   satisfy an `emails` entry.
// - `emails`: the whole address, exactly, ASCII case-insensitive.
// - `emailDomains`: the part after the only `@` (zero or several `@`, or an empty local part or
//   domain, never match). `example.com` matches exactly that domain. `.example.com` (or
//   `*.example.com`) matches subdomains at any depth and NOT the bare `example.com`, as
//   oauth2-proxy's `--email-domain` does; list both to allow both. No `*` wildcard: it would
//   mean "any email", which `allow: {}` already says more plainly.
// - `groups`: exact, case-sensitive (group names are identifiers, e.g. Keycloak's `/admins`),
//   from the groups claim as an array of strings or a single string: `groups`, or the claim path
//   the provider's `groupsClaim` names (contract/claim-path.ts), e.g. Keycloak's
//   `realm_access.roles`. Only the mapped claim is read: a provider that keeps roles elsewhere
//   and also sends a `groups` claim is decided on the roles the operator named.
// - A provider's `userClaim` (the user is another claim than `sub`): a user without a usable value
//   there (a non-empty string or a number) is refused (`userClaim` below), whatever the rules,
//   rather than reaching the upstream with no user header.
// - `claims`: the claim's value, or any element of it when it is an array (one level), compared
//   as strings: strings as is, finite numbers and booleans through String(), so a YAML `42` or
//   `true` matches a token's `"42"` or `"true"` and the reverse. Objects, null and nested arrays
//   never match. Only the claims object's own properties are read, so a rule on `constructor` or
//   `__proto__` cannot be satisfied by Object.prototype.
//
// - `providers`: the identity's provider must be listed. normalize.ts makes it explicit: with
//   several providers on the upstream and a rule on claims, it is the upstream's default provider
//   unless the file lists others, because the same `sub`, email or group at two providers can be
//   two different people (a partner's "alice" in "admins" is not the staff's).
//
// A refusal names the rule that failed and why, for the log line of the 403 (never shown to the
// client). `missingClaim` is set when the identity lacks the claim the rule reads: usually the
// provider was not asked for it (a scope or mapper is missing), which the operator must fix.

import type { AllowRules } from '../options/types.js'
import { DEFAULT_CLAIM_MAPPING, formatClaimPath, mappedGroups, mappedUser, type ClaimMapping } from '../contract/claim-path.js'
import { asciiLower } from '../lib/url-chars.js'

export type AllowRule = 'providers' | 'emails' | 'emailDomains' | 'groups' | 'claims' | 'userClaim'

export interface AllowRefusal {
  rule: AllowRule
  /** Why, in words for the log; never a claim value. */
  reason: string
  /** The claim the rule needs and the identity does not carry. */
  missingClaim?: string
}

export type AllowResult = { allowed: true } | ({ allowed: false } & AllowRefusal)

/** The verdict on the claims of a user of the provider named `provider`, whose groups `mapping` locates. */
export type AllowPolicy = (claims: Record<string, unknown>, provider: string, mapping?: ClaimMapping) => AllowResult

const ALLOWED: AllowResult = { allowed: true }
const ALLOW_ALL: AllowPolicy = () => ALLOWED

function missing(rule: AllowRule, claim: string): AllowResult {
  return { allowed: false, rule, reason: `the session has no \`${claim}\` claim: request the scope or mapper that adds it`, missingClaim: claim }
}

function refused(rule: AllowRule, reason: string): AllowResult {
  return { allowed: false, rule, reason }
}
function own(claims: Record<string, unknown>, name: string): unknown {
  return Object.hasOwn(claims, name) ? claims[name] : undefined
}

function claimString(v: unknown): string | null {
  if (typeof v === 'string') return v
  if (typeof v === 'number') return Number.isFinite(v) ? String(v) : null
  if (typeof v === 'boolean') return String(v)
  return null
}

/** The rule `email_verified` must pass: true, "true" or absent. */
function emailVerified(value: unknown): boolean {
  return value === undefined || value === true || value === 'true'
}

interface DomainRules {
  exact: Set<string>
  /** `.example.com` forms, for the dot-boundary suffix check. */
  suffixes: string[]
}

function parseDomains(entries: readonly string[]): DomainRules {
  const exact = new Set<string>()
  const suffixes: string[] = []
  for (const entry of entries) {
    let domain = asciiLower(entry)
    const wildcard = domain.startsWith('*.')
    if (wildcard) domain = domain.slice(1)
    if (domain === '' || domain === '.' || domain.includes('@') || /\s/.test(domain)) {
      throw new TypeError(`allow.emailDomains: ${JSON.stringify(entry)} is not a domain`)
    }
    if (domain.startsWith('.')) suffixes.push(domain)
    else exact.add(domain)
  }
  return { exact, suffixes }
}

function domainAllowed(email: string, rules: DomainRules): boolean {
  const at = email.indexOf('@')
  if (at <= 0 || at !== email.lastIndexOf('@') || at === email.length - 1) return false
  const domain = email.slice(at + 1)
  if (rules.exact.has(domain)) return true
  for (const suffix of rules.suffixes) {
    if (domain.length > suffix.length && domain.endsWith(suffix)) return true
  }
  return false
}

function anyGroup(value: unknown, accepted: Set<string>): boolean {
  if (typeof value === 'string') return accepted.has(value)
  if (!Array.isArray(value)) return false
  for (const g of value) {
    if (typeof g === 'string' && accepted.has(g)) return true
  }
  return false
}

function claimMatches(value: unknown, accepted: Set<string>): boolean {
  if (Array.isArray(value)) {
    for (const v of value) {
      const s = claimString(v)
      if (s !== null && accepted.has(s)) return true
    }
    return false
  }
  const s = claimString(value)
  return s !== null && accepted.has(s)
}

/**
 * Whether `rules` say who may pass at all (`providers`, or a kind that restricts; empty ones do
 * not, see above). Such rules are about a signed-in user, so they need one: decision.ts asks for a
 * sign-in on a path they decide even on an `auth: optional` upstream.
 */
export function allowRestricts(rules: AllowRules): boolean {
  const listed = [rules.emails, rules.emailDomains, rules.groups].some((kind) => kind !== undefined && kind.length > 0)
  return rules.providers !== undefined || listed || Object.keys(rules.claims ?? {}).length > 0
}

export function createAllowPolicy(rules: AllowRules): AllowPolicy {
  if (!allowRestricts(rules)) return ALLOW_ALL
  const emails = rules.emails !== undefined && rules.emails.length > 0 ? new Set(rules.emails.map(asciiLower)) : null
  const domains = rules.emailDomains !== undefined && rules.emailDomains.length > 0 ? parseDomains(rules.emailDomains) : null
  const groups = rules.groups !== undefined && rules.groups.length > 0 ? new Set(rules.groups) : null
  const claimRules: Array<{ name: string; accepted: Set<string> }> = []
  for (const [name, values] of Object.entries(rules.claims ?? {})) {
    const accepted = new Set<string>()
    for (const v of values) {
      const s = claimString(v)
      if (s !== null) accepted.add(s)
    }
    claimRules.push({ name, accepted })
  }
  const providers = rules.providers === undefined ? null : new Set(rules.providers)

  return (claims, provider, mapping = DEFAULT_CLAIM_MAPPING) => {
    if (providers !== null && !providers.has(provider)) return refused('providers', 'the provider is not one of allow.providers')
    if (emails !== null || domains !== null) {
      const rule: AllowRule = emails !== null ? 'emails' : 'emailDomains'
      const raw = own(claims, 'email')
      if (raw === undefined) return missing(rule, 'email')
      if (typeof raw !== 'string' || raw === '') return refused(rule, 'the `email` claim is not a non-empty string')
      if (!emailVerified(own(claims, 'email_verified'))) return refused(rule, '`email_verified` is present and not true')
      const email = asciiLower(raw)
      if (emails !== null && !emails.has(email)) return refused('emails', 'the email is not one of allow.emails')
      if (domains !== null && !domainAllowed(email, domains)) return refused('emailDomains', 'the email domain is not one of allow.emailDomains')
    }
    if (groups !== null) {
      const value = mapping.isDefault ? own(claims, 'groups') : mappedGroups(claims, mapping)
      if (value === undefined) return missing('groups', mapping.isDefault ? 'groups' : formatClaimPath(mapping.groups))
      if (!anyGroup(value, groups)) return refused('groups', 'none of the groups is one of allow.groups')
    }
    for (const rule of claimRules) {
      const value = own(claims, rule.name)
      if (value === undefined) return missing('claims', rule.name)
      if (!claimMatches(value, rule.accepted)) return refused('claims', `the \`${rule.name}\` claim has none of the accepted values`)
    }
    return ALLOWED
  }
}

/**
 * The verdict of a provider's `userClaim`: a user whose mapped claim holds no usable user (absent,
 * empty, an object or a list) is refused, never passed on without a user header. Only asked for
 * a mapping that is not the default (`sub` is always a string).
 */
export function userClaimVerdict(claims: Record<string, unknown>, mapping: ClaimMapping): AllowResult {
  if (mappedUser(claims, mapping) !== undefined) return ALLOWED
  const path = formatClaimPath(mapping.user)
  return { allowed: false, rule: 'userClaim', reason: `the \`${path}\` claim (userClaim) is not a non-empty string or a number`, missingClaim: path }
}
