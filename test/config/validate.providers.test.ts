// Several providers (`providers:`) and the one-provider form (`provider:`, named `default`): what
// the loader accepts, what it refuses naming the key, and the defaults it fills in.

import t from 'tap'
import { CLIENT_SECRET, problems, resolve } from '../fixtures/config/base.ts'

const STAFF = { name: 'staff', issuer: 'https://login.example.com/realms/staff', clientId: 'gateway', clientSecret: CLIENT_SECRET }
const PARTNERS = { name: 'partners', issuer: 'https://partners.example.net', clientId: 'gw', clientSecret: CLIENT_SECRET }
/** The minimal configuration with `providers:` instead of `provider:`. */
const several = (list: unknown[], patch: Record<string, unknown> = {}) => ({ provider: undefined, providers: list, ...patch })

t.test('provider: is one provider named default, which every upstream accepts', async (t) => {
  const config = resolve()
  t.strictSame(config.providers.map((p) => p.name), ['default'])
  t.strictSame(config.upstreams[0]?.providers, ['default'])
  t.strictSame(problems({ upstreams: [{ name: 'app', target: 'http://127.0.0.1:3000', providers: ['default'] }] }), [])
})

t.test("providers: in order; an upstream without providers accepts the first alone, ['*'] all", async (t) => {
  const config = resolve(
    several([STAFF, PARTNERS], {
      upstreams: [
        { name: 'app', target: 'http://127.0.0.1:3000' },
        { name: 'partner-portal', match: { pathPrefix: '/partners' }, target: 'http://127.0.0.1:3001', providers: ['partners', 'staff'] },
        { name: 'all', match: { pathPrefix: '/all' }, target: 'http://127.0.0.1:3002', providers: ['*'] },
      ],
    }),
  )
  t.strictSame(config.providers.map((p) => [p.name, p.issuer, p.audiences]), [
    ['staff', STAFF.issuer, ['gateway']],
    ['partners', PARTNERS.issuer, ['gw']],
  ])
  t.strictSame(config.upstreams.map((u) => u.providers), [['staff'], ['partners', 'staff'], ['staff', 'partners']])
})

t.test('exactly one of provider and providers', async (t) => {
  t.strictSame(problems({ providers: [STAFF] }), ['providers: cannot be given with provider: use providers alone (name the former provider in it)'])
  t.strictSame(problems({ provider: undefined }), ['provider: is required (or providers, a list, for several providers)'])
  t.strictSame(problems(several([])), ['providers: must not be empty'])
})

t.test('names and issuers are unique: each selects one provider', async (t) => {
  t.strictSame(problems(several([STAFF, { ...PARTNERS, name: 'Staff' }])), ['providers[1].name: duplicate of providers[0].name'])
  t.strictSame(problems(several([STAFF, { ...PARTNERS, issuer: STAFF.issuer }])), [
    "providers[1].issuer: same issuer as providers[0]: a token's iss must select one provider",
  ])
  t.strictSame(problems(several([{ ...STAFF, name: undefined }])), ['providers[0].name: is required'])
  t.match(problems(several([{ ...STAFF, name: 'a b' }])), [/^providers\[0\]\.name: must start with a letter or digit/])
})

t.test("each provider's own rules name the key where it is", async (t) => {
  t.strictSame(problems(several([STAFF, { ...PARTNERS, issuer: 'http://partners.example.net' }])), [
    'providers[1].issuer: must be an https URL (http only with providers[1].allowInsecureHttp: true)',
  ])
  t.strictSame(problems(several([STAFF, { ...PARTNERS, clientSecret: undefined }])), ['providers[1].clientSecret: is required'])
  t.strictSame(problems(several([STAFF, { ...PARTNERS, profile: 'fapi2' }])), [
    'providers[1].clientAuthMethod: must be private_key_jwt with providers[1].profile: fapi2',
  ])
})

t.test("an upstream's providers must be configured providers", async (t) => {
  const upstream = (providers: string[]) => ({ upstreams: [{ name: 'app', target: 'http://127.0.0.1:3000', providers }] })
  t.strictSame(problems(several([STAFF, PARTNERS], upstream(['staff', 'nobody']))), ['upstreams[0].providers[1]: names no provider (configured: staff, partners)'])
  t.strictSame(problems(upstream(['staff'])), ['upstreams[0].providers[0]: names no provider (configured: default)'])
  t.strictSame(problems(upstream([])), ['upstreams[0].providers: must not be empty'])
  t.strictSame(problems(upstream(['default', 'default'])), ['upstreams[0].providers[1]: duplicate of upstreams[0].providers[0]'])
  t.strictSame(problems(several([STAFF, PARTNERS], upstream(['*']))), [], "'*': every provider")
  t.strictSame(problems(several([STAFF, PARTNERS], upstream(['staff', '*']))), ["upstreams[0].providers: '*' means every provider and stands alone"])
})

t.test("allow.providers must be providers the upstream accepts; unset upstream providers are the default's alone", async (t) => {
  const upstream = (extra: Record<string, unknown>) => ({ upstreams: [{ name: 'app', target: 'http://127.0.0.1:3000', ...extra }] })
  t.strictSame(problems(several([STAFF, PARTNERS], upstream({ allow: { providers: ['partners'] } }))), [
    'upstreams[0].allow.providers[0]: names no provider (the upstream accepts: staff)',
  ])
  t.strictSame(problems(several([STAFF, PARTNERS], upstream({ providers: ['*'], allow: { providers: ['partners'] } }))), [])
  t.strictSame(problems(several([STAFF, PARTNERS], upstream({ providers: ['*'], allow: { providers: ['*', 'staff'] } }))), [
    "upstreams[0].allow.providers: '*' means every provider and stands alone",
  ])
})

t.test('normalized: upstream and allow providers made explicit', async (t) => {
  const config = (extra: Record<string, unknown>) => resolve(several([STAFF, PARTNERS], { upstreams: [{ name: 'app', target: 'http://127.0.0.1:3000', ...extra }] })).upstreams[0]
  t.same(config({})?.providers, ['staff'], 'unset: the first provider alone')
  t.same(config({ providers: ['*'] })?.providers, ['staff', 'partners'])
  t.same(config({ providers: ['*'], allow: { groups: ['admins'] } })?.allow.providers, ['staff'], 'a claim rule without allow.providers: the default provider')
  t.same(config({ providers: ['*'], allow: { groups: ['admins'], providers: ['*'] } })?.allow.providers, ['staff', 'partners'])
  t.equal(config({ providers: ['*'], allow: {} })?.allow.providers, undefined, 'no claim rule: no restriction beyond the upstream')
  t.equal(config({ allow: { groups: ['admins'] } })?.allow.providers, undefined, 'one provider on the upstream: nothing to tell apart')
  t.same(config({ providers: ['*'], allow: { acr: ['mfa'] } })?.allow.providers, ['staff'], "an acr rule counts as a claim rule: one provider's mfa says nothing of another's")
  t.equal(config({ providers: ['*'], allow: { maxAuthAgeSeconds: 60 } })?.allow.providers, undefined, 'auth_time means the same at every provider')
})

t.test('forwardAccessToken is refused only on upstreams that accept a DPoP provider', async (t) => {
  const bound = { ...PARTNERS, dpop: true }
  const forwarding = (providers?: string[]) => ({
    upstreams: [{ name: 'app', target: 'http://127.0.0.1:3000', forwardAccessToken: true, ...(providers === undefined ? {} : { providers }) }],
  })
  t.strictSame(problems(several([STAFF, bound], forwarding(['staff']))), [])
  t.strictSame(problems(several([STAFF, bound], forwarding())), [], 'unset: the first provider (staff) alone')
  t.strictSame(problems(several([STAFF, bound], forwarding(['*']))), [
    'upstreams[0].forwardAccessToken: cannot be true with providers[1].dpop: DPoP-bound access tokens are not forwarded',
  ])
  t.strictSame(problems(several([STAFF, bound], forwarding(['partners']))), [
    'upstreams[0].forwardAccessToken: cannot be true with providers[1].dpop: DPoP-bound access tokens are not forwarded',
  ])
})
