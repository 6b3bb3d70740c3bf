// provider.github (docs/providers/github.md, src/config/cross-key/github.ts): what the loader
// accepts, and each OpenID Connect key it refuses on a GitHub provider, naming the key.

import t from 'tap'
import { problems, resolve } from '../../fixtures/config/base.ts'

const github = (patch: Record<string, unknown> = {}, block: Record<string, unknown> = {}) => ({
  provider: { issuer: 'https://github.com', github: block, ...patch },
})

t.test('a GitHub provider: defaults, and nothing refused', async (t) => {
  t.strictSame(problems(github()), [])
  t.strictSame(resolve(github()).providers[0]?.github, {
    organizations: [],
    teams: [],
    repositories: [],
    users: [],
    scopes: ['read:user', 'user:email', 'read:org'],
  })
  t.equal(resolve().providers[0]?.github, undefined, 'an OpenID provider has none')
  const block = { organizations: ['acme'], teams: ['acme/platform-admins'], repositories: ['acme/infra'], users: ['octocat'], scopes: ['read:user', 'user:email', 'read:org', 'repo'] }
  t.strictSame(problems(github({}, block)), [], 'every list')
  t.strictSame(problems(github({ userClaim: 'preferred_username', groupsClaim: 'groups', additionalClaims: ['name'] })), [], 'claim mapping applies')
  t.strictSame(problems(github({ issuer: 'https://ghe.example.com' })), [], 'GitHub Enterprise Server by its base URL')
})

t.test('the lists refuse what GitHub cannot name', async (t) => {
  t.match(problems(github({}, { teams: ['acme'] })), [/^provider\.github\.teams\[0\]: /], 'a team is org/team-slug')
  t.match(problems(github({}, { repositories: ['infra'] })), [/^provider\.github\.repositories\[0\]: /], 'a repository is owner/repo')
  t.match(problems(github({}, { organizations: ['acme/platform'] })), [/^provider\.github\.organizations\[0\]: /], 'an organization is a login')
  t.match(problems(github({}, { users: ['-bad'] })), [/^provider\.github\.users\[0\]: /], 'a login')
})

t.test("every OpenID Connect key is refused on a GitHub provider, naming it", async (t) => {
  const refused: Array<[Record<string, unknown>, string]> = [
    [{ idTokenAlgorithms: ['RS256'] }, 'provider.idTokenAlgorithms'],
    [{ clockToleranceSeconds: 60 }, 'provider.clockToleranceSeconds'],
    [{ profile: 'fapi2', clientAuthMethod: 'private_key_jwt', clientSecret: undefined, clientKey: '{"kty":"OKP"}' }, 'provider.profile'],
    [{ dpop: true }, 'provider.dpop'],
    [{ pushedAuthorizationRequests: 'required' }, 'provider.pushedAuthorizationRequests'],
    [{ responseMode: 'form_post' }, 'provider.responseMode'],
    [{ scopes: ['openid', 'profile', 'email', 'groups'] }, 'provider.scopes'],
    [{ offlineAccess: true }, 'provider.offlineAccess'],
    [{ audiences: ['api'] }, 'provider.audiences'],
    [{ bearer: { algorithms: ['ES256'] } }, 'provider.bearer.algorithms'],
    [{ bearer: { introspection: true } }, 'provider.bearer.introspection'],
    [{ bearer: { requireAtJwt: true } }, 'provider.bearer.requireAtJwt'],
    [{ postLogoutRedirectUri: 'https://app.example.com/' }, 'provider.postLogoutRedirectUri'],
    [{ ssf: { delivery: 'poll' } }, 'provider.ssf'],
    [{ claimSources: { userInfo: true } }, 'provider.claimSources'],
  ]
  for (const [patch, key] of refused) {
    const found = problems(github(patch))
    t.ok(
      found.some((p) => p.startsWith(`${key}: is OpenID Connect's and cannot be used with provider.github: `)),
      `${key} refused: ${JSON.stringify(found)}`,
    )
    t.strictSame(problems({ provider: patch }).filter((p) => p.includes('provider.github')), [], `${key} is no problem without github`)
  }
  t.ok(
    problems(github({ clientAuthMethod: 'private_key_jwt', clientSecret: undefined, clientKey: 'x' })).some((p) =>
      p.startsWith("provider.clientAuthMethod: is OpenID Connect's and cannot be used with provider.github: GitHub takes a client secret"),
    ),
    'private_key_jwt refused',
  )
  // The keys whose defaults an operator did not write stay silent: pushedAuthorizationRequests off
  // does what it says (never push), and so do the defaults.
  t.strictSame(problems(github({ pushedAuthorizationRequests: 'off', scopes: ['email', 'openid', 'profile'], bearer: { introspection: false } })), [])
})

t.test('several providers: the rule names the provider', async (t) => {
  const found = problems({
    provider: undefined,
    providers: [
      { name: 'gh', issuer: 'https://github.com', clientId: 'a', clientSecret: 'b', github: {}, dpop: true },
      { name: 'kc', issuer: 'https://idp.example.com', clientId: 'a', clientSecret: 'b', dpop: true },
    ],
  })
  t.strictSame(
    found.filter((p) => p.includes('github')),
    ["providers[0].dpop: is OpenID Connect's and cannot be used with providers[0].github: GitHub takes no DPoP proof"],
  )
})
