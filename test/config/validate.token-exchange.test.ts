// upstreams[].tokenExchange and upstreams[].resourceMetadata: what the schema refuses, each naming
// the key (docs/features/token-exchange.md); the rules across keys are tested in
// test/config/cross-key/upstreams.test.ts.

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

