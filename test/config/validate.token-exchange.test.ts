// upstreams[].tokenExchange and upstreams[].resourceMetadata: what the schema and cross-key-rules.ts refuse,
// each naming the key (docs/features/token-exchange.md).

import t from 'tap'
import { problems, resolve, withUpstream, type Tree } from '../fixtures/config/base.ts'

const exchange = (tokenExchange: unknown, extra: Tree = {}): string[] => problems(withUpstream({ tokenExchange, ...extra }))

t.test('tokenExchange: valid forms are kept as written', async (t) => {
  t.strictSame(exchange({ audience: 'orders-api', scope: ['orders.read', 'orders.write'], resource: 'https://orders.example.com/api' }), [])
  t.strictSame(exchange({ audience: 'orders-api' }), [])
  t.strictSame(exchange({ resource: 'urn:example:orders' }), [])
  const config = resolve(withUpstream({ tokenExchange: { audience: 'orders-api', scope: ['orders.read'] } }))
  t.same(config.upstreams[0]?.tokenExchange, { audience: 'orders-api', scope: ['orders.read'] })
  t.equal(resolve().upstreams[0]?.tokenExchange, undefined, 'absent by default: no exchange')
  t.equal(resolve().upstreams[0]?.resourceMetadata, undefined, 'unset by default (on: access/resource-metadata.ts decides)')
})

t.test('tokenExchange: refused values, naming the key', async (t) => {
  t.strictSame(exchange({}), ['upstreams[0].tokenExchange: must not be empty'])
  t.match(exchange({ audience: 'orders api' }), ['upstreams[0].tokenExchange.audience: must be 1 to 2048 printable ASCII characters without spaces'])
  t.match(exchange({ scope: ['a b'] }), ['upstreams[0].tokenExchange.scope[0]: must be a scope token (no spaces, quotes or backslashes)'])
  t.match(exchange({ scope: [] }), ['upstreams[0].tokenExchange.scope: must not be empty'])
  t.match(exchange({ resource: 'orders' }), ['upstreams[0].tokenExchange.resource: must be an absolute URI'])
  t.match(exchange({ resource: 'https://orders.example.com/#x' }), ['upstreams[0].tokenExchange.resource: must not have a fragment (RFC 8707)'])
  t.match(exchange({ audience: 'a', grant: 'x' }), ['upstreams[0].tokenExchange.grant: unknown key'])
})

t.test('tokenExchange: refused where it could not do what it says', async (t) => {
  t.strictSame(exchange({ audience: 'a' }, { auth: 'none' }), ['upstreams[0].tokenExchange: needs a signed-in user: it does nothing with upstreams[0].auth: none'])
  t.strictSame(exchange({ audience: 'a' }, { forwardAccessToken: true }), [
    "upstreams[0].tokenExchange: cannot be given with upstreams[0].forwardAccessToken: true (the exchanged token is the upstream's only Authorization)",
  ])
  t.strictSame(problems({ ...withUpstream({ tokenExchange: { audience: 'a' } }), provider: { dpop: true } }), [
    'upstreams[0].tokenExchange: cannot be used with provider.dpop (or profile: fapi2): DPoP-bound access tokens are not exchanged',
  ])
})

t.test('resourceMetadata: a boolean or an object', async (t) => {
  t.strictSame(problems(withUpstream({ resourceMetadata: {} })), [])
  t.strictSame(problems(withUpstream({ resourceMetadata: true })), [])
  t.strictSame(problems(withUpstream({ resourceMetadata: false })), [])
  t.strictSame(problems(withUpstream({ resourceMetadata: { scopes: ['orders.read'] } })), [])
  t.equal(resolve(withUpstream({ resourceMetadata: false })).upstreams[0]?.resourceMetadata, false)
  t.same(resolve(withUpstream({ resourceMetadata: { scopes: ['orders.read'] } })).upstreams[0]?.resourceMetadata, { scopes: ['orders.read'] })
  t.equal(resolve(withUpstream({ resourceMetadata: '${RM}' }), { RM: 'false' }).upstreams[0]?.resourceMetadata, false, 'an environment value is coerced to the boolean')
  t.match(problems(withUpstream({ resourceMetadata: 'no' })), [/^upstreams\[0\]\.resourceMetadata: /])
  t.match(problems(withUpstream({ resourceMetadata: { scopes: ['a', 'a'] } })), [/^upstreams\[0\]\.resourceMetadata\.scopes/])
  t.match(problems(withUpstream({ resourceMetadata: { issuers: [] } })), ['upstreams[0].resourceMetadata.issuers: unknown key'])
})

t.test('resourceMetadata on auth: none: refused when it asks for a document, accepted when false', async (t) => {
  const refused = ['upstreams[0].resourceMetadata: needs a signed-in user: it does nothing with upstreams[0].auth: none']
  t.strictSame(problems(withUpstream({ resourceMetadata: {}, auth: 'none' })), refused)
  t.strictSame(problems(withUpstream({ resourceMetadata: { scopes: ['a'] }, auth: 'none' })), refused)
  t.strictSame(problems(withUpstream({ resourceMetadata: true, auth: 'none' })), refused)
  t.strictSame(problems(withUpstream({ resourceMetadata: false, auth: 'none' })), [])
  t.strictSame(problems(withUpstream({ auth: 'none' })), [], 'unset: nothing to refuse')
})

t.test('tokenAudience: provider or resource; resource refused where it could not be checked as documented', async (t) => {
  t.equal(resolve().upstreams[0]?.tokenAudience, undefined, "unset: the provider's audiences, nothing new decided")
  t.equal(resolve(withUpstream({ tokenAudience: 'resource' })).upstreams[0]?.tokenAudience, 'resource')
  t.strictSame(problems(withUpstream({ tokenAudience: 'provider' })), [])
  t.strictSame(problems(withUpstream({ tokenAudience: 'resource', resourceMetadata: { scopes: ['mcp:tools'] } })), [])
  t.match(problems(withUpstream({ tokenAudience: 'client' })), [/^upstreams\[0\]\.tokenAudience: /])
  t.strictSame(problems(withUpstream({ tokenAudience: 'resource', auth: 'none' })), [
    'upstreams[0].tokenAudience: needs a signed-in user: it does nothing with upstreams[0].auth: none',
  ])
  t.strictSame(problems(withUpstream({ tokenAudience: 'resource', resourceMetadata: false })), [
    'upstreams[0].tokenAudience: resource needs the protected resource metadata that names the resource (RFC 9728): it cannot be given with upstreams[0].resourceMetadata: false',
  ])
})

t.test("tokenAudience: resource: refused when a provider's audiences name the resource (its tokens would pass everywhere)", async (t) => {
  const mcp = { name: 'mcp', match: { pathPrefix: '/mcp' }, target: 'http://127.0.0.1:3001', tokenAudience: 'resource' }
  const base = withUpstream({})
  const publicUrl = resolve().server.publicUrl
  const withAudiences = (audiences: string[], upstream: Tree = mcp): Tree => ({
    ...base,
    provider: { ...(base.provider as Tree), audiences },
    upstreams: [...(base.upstreams as Tree[]), upstream],
  })
  t.strictSame(problems(withAudiences(['orders-api'])), [], 'other audiences: accepted')
  t.strictSame(problems(withAudiences([`${publicUrl}/mcp`])), [
    `provider.audiences: names ${publicUrl}/mcp, the resource of upstreams[1].tokenAudience: resource, whose tokens would then be accepted at every upstream of this provider`,
  ])
  t.equal(problems(withAudiences([`${publicUrl}/mcp`.toUpperCase()])).length, 1, 'whatever its case')
  t.equal(problems(withAudiences(['https://mcp.example.com/mcp'], { ...mcp, match: { pathPrefix: '/mcp', hosts: ['mcp.example.com'] } })).length, 1, 'on a host of match.hosts')
  t.strictSame(problems(withAudiences([`${publicUrl}/mcp`], { ...mcp, tokenAudience: 'provider' })), [], 'tokenAudience: provider: nothing to refuse')
})
