// access/resource-metadata.ts: which upstreams publish, and on which hosts (docs/features/token-exchange.md).

import t from 'tap'
import {
  challengeScope,
  documentHosts,
  publishesResourceMetadata,
  resourceAudience,
  resourceMetadataDocument,
  resourceMetadataUrl,
} from '#src/access/resource-metadata'
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

t.test("tokenAudience: resource: the audience is the document's resource, on the request's host with match.hosts", async (t) => {
  t.equal(resourceAudience(upstream({}), 'https://gw.example'), undefined, 'unset: none')
  t.equal(resourceAudience(upstream({ tokenAudience: 'provider' }), 'https://gw.example'), undefined)
  const fixed = upstream({ tokenAudience: 'resource', match: { pathPrefix: '/mcp' } })
  t.equal(resourceAudience(fixed, 'https://gw.example/base')?.('other.example'), 'https://gw.example/mcp', 'the public origin, whatever the host')
  t.equal(resourceAudience(fixed, 'https://gw.example')?.(undefined), resourceMetadataDocument(fixed, 'https://gw.example', []).resource)
  const root = upstream({ tokenAudience: 'resource', match: { pathPrefix: '/' } })
  t.equal(resourceAudience(root, 'https://gw.example')?.(undefined), 'https://gw.example', '`/`: the bare origin')
  const hosted = upstream({ tokenAudience: 'resource', match: { pathPrefix: '/mcp', hosts: ['mcp.example'] } })
  t.equal(resourceAudience(hosted, 'https://gw.example')?.('mcp.example'), 'https://mcp.example/mcp')
  t.equal(resourceAudience(hosted, 'https://gw.example')?.('mcp.example'), resourceMetadataDocument(hosted, 'https://mcp.example', []).resource)
})

t.test("the challenge's scope: resourceMetadata.scopes, on tokenAudience: resource only", async (t) => {
  t.equal(challengeScope(upstream({ tokenAudience: 'resource', resourceMetadata: { scopes: ['mcp:tools', 'mcp:read'] } })), 'mcp:tools mcp:read')
  t.equal(challengeScope(upstream({ tokenAudience: 'resource' })), undefined)
  t.equal(challengeScope(upstream({ resourceMetadata: { scopes: ['a'] } })), undefined, 'other upstreams: their challenge unchanged')
})
