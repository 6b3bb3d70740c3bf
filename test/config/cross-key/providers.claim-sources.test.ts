// provider.claimSources (docs/features/claim-sources.md): what the loader accepts, what it
// refuses naming the key, and that the block asks for nothing unless told.

import t from 'tap'
import { problems, resolve } from '../../fixtures/config/base.ts'

const sources = (claimSources: Record<string, unknown>, patch: Record<string, unknown> = {}) => ({ provider: { claimSources }, ...patch })

t.test('every key is off by default; unset, there is no block at all', async (t) => {
  t.equal(resolve().providers[0]?.claimSources, undefined)
  t.strictSame(resolve(sources({})).providers[0]?.claimSources, {
    userInfo: false,
    trustedIssuers: [],
    trustedEndpoints: [],
    entraGroupOverage: false,
    graphBaseUrl: 'https://graph.microsoft.com',
    gitlabProjects: [],
  })
})

t.test('the group overage needs a server-side store: hundreds of group ids do not fit in cookies', async (t) => {
  t.strictSame(problems(sources({ entraGroupOverage: true })), [
    'provider.claimSources.entraGroupOverage: needs session.store memory or redis: the hundreds of group ids of an overage do not fit in cookie sessions',
  ])
  t.strictSame(problems(sources({ entraGroupOverage: true }, { session: { store: 'memory' } })), [])
})

t.test('URLs the access token goes to are https unless allowInsecureHttp', async (t) => {
  const memory = { session: { store: 'memory' } }
  t.strictSame(problems(sources({ entraGroupOverage: true, graphBaseUrl: 'http://graph.test' }, memory)), [
    'provider.claimSources.graphBaseUrl: must be an https URL (http only with provider.allowInsecureHttp: true)',
  ])
  t.strictSame(problems(sources({ trustedEndpoints: ['https://claims.example/a', 'http://claims.example/b'] })), [
    'provider.claimSources.trustedEndpoints[1]: must be an https URL (http only with provider.allowInsecureHttp: true)',
  ])
  t.strictSame(problems({ provider: { allowInsecureHttp: true, claimSources: { trustedEndpoints: ['http://claims.example/b'] } } }), [])
  t.strictSame(problems(sources({ trustedIssuers: ['not a url'] })).length, 1, 'an issuer is an URL')
  t.strictSame(problems(sources({ userinfo: true })).length, 1, 'an unknown key is refused')
})
