// access/resource-metadata.ts: which upstreams publish, and on which hosts (docs/features/token-exchange.md).

import t from 'tap'
import { documentHosts, publishesResourceMetadata, resourceMetadataDocument, resourceMetadataUrl } from '#src/access/resource-metadata'
import { resolve, withUpstream, type Tree } from '../fixtures/config/base.ts'
import type { UpstreamConfig } from '#src/options/types'

const upstream = (patch: Tree): UpstreamConfig => resolve(withUpstream(patch)).upstreams[0]!

t.test('on for every upstream that accepts Bearer tokens, unless false', async (t) => {
  t.ok(publishesResourceMetadata(upstream({})), 'unset')
  t.ok(publishesResourceMetadata(upstream({ auth: 'optional' })))
  t.ok(publishesResourceMetadata(upstream({ resourceMetadata: true })))
  t.notOk(publishesResourceMetadata(upstream({ resourceMetadata: false })))
  t.notOk(publishesResourceMetadata(upstream({ auth: 'none' })))
  t.equal(
    resourceMetadataUrl(upstream({ match: { pathPrefix: '/orders' } }), 'https://gw.example', 'gw.example'),
    'https://gw.example/.well-known/oauth-protected-resource/orders',
  )
  t.equal(resourceMetadataUrl(upstream({ resourceMetadata: false }), 'https://gw.example', 'gw.example'), undefined)
})

t.test('scopes_supported only when set', async (t) => {
  t.notOk('scopes_supported' in resourceMetadataDocument(upstream({}), 'https://gw.example', ['https://idp']))
  t.notOk('scopes_supported' in resourceMetadataDocument(upstream({ resourceMetadata: true }), 'https://gw.example', ['https://idp']))
  t.same(resourceMetadataDocument(upstream({ resourceMetadata: { scopes: ['a'] } }), 'https://gw.example', []).scopes_supported, ['a'])
})

t.test('a host-less document leaves the hosts of upstreams with the same prefix', async (t) => {
  const hostless = upstream({ match: { pathPrefix: '/' } })
  t.equal(documentHosts(hostless, new Map()), undefined, 'every host')
  const hosts = documentHosts(
    hostless,
    new Map([
      ['/', ['api.test', 'b.test']],
      ['/x', ['c.test']],
    ]),
  )!
  t.notOk(hosts.test('api.test'))
  t.notOk(hosts.test('API.test:8080'))
  t.notOk(hosts.test('b.test'))
  t.ok(hosts.test('c.test'), 'another prefix takes nothing here')
  t.ok(hosts.test('api.test.evil'))
  t.ok(hosts.test('gw.example'))
  const named = documentHosts(upstream({ match: { pathPrefix: '/', hosts: ['api.test'] } }), new Map([['/', ['api.test']]]))!
  t.ok(named.test('api.test'), 'an upstream with hosts: its own')
  t.notOk(named.test('gw.example'))
})
