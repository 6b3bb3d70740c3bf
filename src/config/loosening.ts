import type { AllowRules, GatewayConfig, UpstreamConfig } from '../options/types.js'

// What a new configuration opens that the running one kept closed: the keys of access rules it
// removes. A reload that does so may be meant, or may be a file caught halfway through an edit
// or a bad merge; either way the operator hears of it, by key, at warn (runtime/live.ts).

const KINDS = ['providers', 'emails', 'emailDomains', 'groups'] as const satisfies ReadonlyArray<keyof AllowRules>

function restricts(list: readonly unknown[] | undefined): boolean {
  return list !== undefined && list.length > 0
}

function allowLoosening(at: string, before: AllowRules, after: AllowRules): string[] {
  const keys: string[] = []
  for (const kind of KINDS) {
    if (restricts(before[kind]) && !restricts(after[kind])) keys.push(`${at}.${kind}`)
  }
  for (const claim of Object.keys(before.claims ?? {})) {
    if (after.claims?.[claim] === undefined) keys.push(`${at}.claims.${claim}`)
  }
  return keys
}

function upstreamLoosening(at: string, before: UpstreamConfig, after: UpstreamConfig): string[] {
  const keys: string[] = []
  if (before.auth === 'required' && after.auth !== 'required') keys.push(`${at}.auth`)
  if (before.auth !== 'none' && after.auth === 'none') {
    if (!keys.includes(`${at}.auth`)) keys.push(`${at}.auth`)
  }
  keys.push(...allowLoosening(`${at}.allow`, before.allow, after.allow))
  // A rule gone leaves its path to the upstream's allow (or to a shorter rule's).
  before.rules.forEach((rule, index) => {
    const next = after.rules.find((r) => r.path === rule.path)
    if (next === undefined) keys.push(`${at}.rules[${index}] (${rule.path}): removed`)
    else keys.push(...allowLoosening(`${at}.rules[${index}].allow`, rule.allow, next.allow))
  })
  const publicBefore = new Set(before.publicPaths)
  if (after.publicPaths.some((glob) => !publicBefore.has(glob))) keys.push(`${at}.publicPaths`)
  return keys
}

/**
 * The keys (by the running file's upstream index, with the upstream's name) whose protection
 * `after` removes: `auth` no longer required, an `allow` kind or claim gone, new public paths, an
 * upstream gone (its paths go to another upstream, with other rules).
 */
export function loosenedKeys(before: GatewayConfig, after: GatewayConfig): string[] {
  const byName = new Map(after.upstreams.map((u) => [u.name, u]))
  return before.upstreams.flatMap((upstream, index) => {
    const at = `upstreams[${index}]`
    const next = byName.get(upstream.name)
    if (next === undefined) return upstream.auth === 'none' ? [] : [`${at} (${upstream.name}): removed`]
    return upstreamLoosening(at, upstream, next).map((key) => `${key} (${upstream.name})`)
  })
}
