import type { AllowRules, GatewayConfig, PathRule, PublicPath, UpstreamConfig } from '../options/types.js'

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

/** What selects a publicPaths or rules entry, as one comparable string. */
function entryKey(entry: PublicPath | Pick<PathRule, 'path' | 'regex' | 'methods'>): string {
  if (typeof entry === 'string') return JSON.stringify([entry, null, null])
  const pattern = 'glob' in entry ? entry.glob : 'path' in entry ? entry.path : undefined
  return JSON.stringify([pattern ?? null, entry.regex ?? null, entry.methods ?? null])
}

function upstreamLoosening(at: string, before: UpstreamConfig, after: UpstreamConfig): string[] {
  const keys: string[] = []
  if (before.auth === 'required' && after.auth !== 'required') keys.push(`${at}.auth`)
  if (before.auth !== 'none' && after.auth === 'none') {
    if (!keys.includes(`${at}.auth`)) keys.push(`${at}.auth`)
  }
  keys.push(...allowLoosening(`${at}.allow`, before.allow, after.allow))
  // A rule gone leaves its path to the upstream's allow (or to a shorter rule's). Rules are the
  // same by what selects them: path or regex, and methods.
  before.rules.forEach((rule, index) => {
    const next = after.rules.find((r) => entryKey(r) === entryKey(rule))
    if (next === undefined) keys.push(`${at}.rules[${index}] (${rule.path ?? rule.regex}): removed`)
    else keys.push(...allowLoosening(`${at}.rules[${index}].allow`, rule.allow, next.allow))
  })
  const publicBefore = new Set(before.publicPaths.map(entryKey))
  if (after.publicPaths.some((entry) => !publicBefore.has(entryKey(entry)))) keys.push(`${at}.publicPaths`)
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
