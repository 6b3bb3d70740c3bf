// Several providers (`providers:`) and the one-provider form (`provider:`, named `default`): what
// the loader accepts, what it refuses naming the key, and the defaults it fills in.

import t from 'tap'
import { problems, resolve } from '../fixtures/config/base.ts'
import { PARTNERS, STAFF, several } from '../fixtures/config/values.ts'

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

