import t from 'tap'
import pino from 'pino'
import type { FastifyBaseLogger } from 'fastify'
import * as oidc from 'openid-client'
import { GatewayError } from '#src/contract/errors'
import { systemClock } from '#src/lib/clock'
import { GithubApi, GithubIdentity, MAX_PAGES, PER_PAGE } from '#src/oidc/github-api'
import { githubApiUrl, githubServerMetadata, githubTokenErrors } from '#src/oidc/github'
import { githubUser, startGithub } from '../fixtures/github.ts'
import type { Teardown } from '../fixtures/stack.ts'

// GitHub's REST API and token endpoint as src/oidc/github.ts and github-api.ts read them, against
// the fixture that plays GitHub by its documented rules (test/fixtures/github.ts).

const log: FastifyBaseLogger = pino({ level: 'silent' })
const CONFIG = { organizations: [], teams: [], repositories: [], users: [], scopes: [] }

async function github(t: Teardown, behaviour: Parameters<typeof startGithub>[0]) {
  const gh = await startGithub(behaviour)
  t.teardown(() => gh.close())
  return gh
}

const teams = (count: number): string[] => Array.from({ length: count }, (_, i) => `acme/team-${String(i).padStart(4, '0')}`)

t.test('every page is followed through the Link header, 100 a page', async (t) => {
  const gh = await github(t, { users: { alice: githubUser(1, { orgs: ['acme'], teams: teams(250) }) } })
  const identity = new GithubIdentity(gh.url, CONFIG, 2000, log, systemClock)
  const claims = await identity.claims(gh.tokenFor('alice'))
  t.strictSame(claims.groups, ['acme', ...teams(250)])
  const pages = gh.requests.filter((r) => r.path === '/api/v3/user/teams')
  t.equal(pages.length, 3, '250 teams in three pages')
  t.ok(pages.every((r) => new URLSearchParams(r.search).get('per_page') === String(PER_PAGE)))
  t.strictSame(claims, { sub: '1', preferred_username: 'alice', email: 'user1@example.com', email_verified: true, groups: claims.groups })
})

t.test('at most MAX_PAGES pages are read: the rest is left out (fewer groups, never more)', async (t) => {
  const gh = await github(t, { users: { alice: githubUser(1, { teams: teams(PER_PAGE * MAX_PAGES + 5) }) } })
  const claims = await new GithubIdentity(gh.url, CONFIG, 2000, log, systemClock).claims(gh.tokenFor('alice'))
  t.equal(claims.groups.length, PER_PAGE * MAX_PAGES)
  t.equal(gh.requests.filter((r) => r.path === '/api/v3/user/teams').length, MAX_PAGES)
})

t.test('a next page outside the API is never fetched, and fails the list', async (t) => {
  const elsewhere = await github(t, {})
  const gh = await github(t, { users: { alice: githubUser(1, { teams: teams(150) }) }, linkOrigin: elsewhere.url })
  await t.rejects(new GithubIdentity(gh.url, CONFIG, 2000, log, systemClock).claims(gh.tokenFor('alice')), { code: 'provider_unavailable', status: 502 })
  t.equal(elsewhere.requests.length, 0, "the user's token never went to the other origin")
})

t.test('rate limits: primary (x-ratelimit-remaining 0, x-ratelimit-reset) and secondary (retry-after), 403 or 429', async (t) => {
  const gh = await github(t, { users: { alice: githubUser(1) } })
  const api = new GithubApi(gh.url, 2000, log, systemClock)
  const token = gh.tokenFor('alice')
  for (const status of [403, 429] as const) {
    gh.set({ rateLimit: { kind: 'primary', status, count: 1, resetInSeconds: 300, retryAfter: 0 } })
    const err = await api.get('/user', token).catch((e: unknown) => e)
    t.ok(err instanceof GatewayError && err.code === 'provider_unavailable', `primary ${status}`)
    const after = Number((err as GatewayError).headers?.['retry-after'])
    t.ok(after >= 298 && after <= 301, `Retry-After until the reset: ${after}`)
    gh.set({ rateLimit: { kind: 'secondary', status, count: 1, resetInSeconds: 0, retryAfter: 60 } })
    await t.rejects(api.get('/user', token), { code: 'provider_unavailable', headers: { 'retry-after': '60' } }, `secondary ${status}`)
  }
  t.equal((await api.get('/user', token)).status, 200, 'answered again')
})

t.test('a 403 that is no rate limit, a 401, a 5xx, or an answer that is not JSON fails (502), never passes', async (t) => {
  const gh = await github(t, { users: { alice: githubUser(1) } })
  const api = new GithubApi(gh.url, 2000, log, systemClock)
  await t.rejects(api.get('/user', 'not-a-token'), { code: 'provider_unavailable' }, '401 Bad credentials')
  gh.set({ apiStatus: 403 })
  await t.rejects(api.get('/user', gh.tokenFor('alice')), { code: 'provider_unavailable' }, 'a 403 without rate limit headers')
  gh.set({ apiStatus: 500 })
  await t.rejects(api.get('/user', gh.tokenFor('alice')), { code: 'provider_unavailable' }, '500')
  gh.set({ apiStatus: 200 })
  await t.rejects(api.get('/user', gh.tokenFor('alice')), { code: 'provider_unavailable' }, '200 with HTML')
  await gh.close()
  await t.rejects(api.get('/user', 'x'), { code: 'provider_unavailable' }, 'GitHub unreachable')
})

t.test("GitHub's token errors in HTTP 200 answers are RFC 6749 5.2's, and openid-client reads them so", async (t) => {
  const gh = await github(t, {})
  const server = githubServerMetadata(gh.url)
  const configuration = new oidc.Configuration(server, gh.clientId, undefined, oidc.ClientSecretPost(gh.clientSecret))
  oidc.allowInsecureRequests(configuration)
  configuration[oidc.customFetch] = githubTokenErrors((url, options) => fetch(url, options as RequestInit), server.token_endpoint ?? '')
  const refused = async (params: Record<string, string>) =>
    oidc.genericGrantRequest(configuration, 'refresh_token', params).then(
      () => undefined,
      (e: unknown) => e,
    )
  const bad = await refused({ refresh_token: 'ghr_unknown' })
  t.ok(bad instanceof oidc.ResponseBodyError, 'a refusal, not a malformed success')
  t.match(bad, { error: 'invalid_grant', status: 400, error_description: /^bad_refresh_token: / })
  const wrongSecret = new oidc.Configuration(server, gh.clientId, undefined, oidc.ClientSecretPost('wrong'))
  oidc.allowInsecureRequests(wrongSecret)
  wrongSecret[oidc.customFetch] = configuration[oidc.customFetch]
  const client = await oidc.genericGrantRequest(wrongSecret, 'refresh_token', { refresh_token: 'x' }).catch((e: unknown) => e)
  t.match(client, { error: 'invalid_client', status: 401, error_description: /^incorrect_client_credentials: / })
})

t.test('where the endpoints are: github.com and GitHub Enterprise Server', async (t) => {
  t.equal(githubApiUrl('https://github.com'), 'https://api.github.com')
  t.equal(githubApiUrl('https://github.com/'), 'https://api.github.com')
  t.equal(githubApiUrl('https://ghe.example.com'), 'https://ghe.example.com/api/v3')
  t.equal(githubApiUrl('https://example.com/github/'), 'https://example.com/github/api/v3')
  t.match(githubServerMetadata('https://github.com'), {
    authorization_endpoint: 'https://github.com/login/oauth/authorize',
    token_endpoint: 'https://github.com/login/oauth/access_token',
  })
  t.match(githubServerMetadata('https://ghe.example.com/'), {
    issuer: 'https://ghe.example.com/',
    authorization_endpoint: 'https://ghe.example.com/login/oauth/authorize',
    token_endpoint: 'https://ghe.example.com/login/oauth/access_token',
  })
  t.notOk('jwks_uri' in githubServerMetadata('https://github.com'), 'no keys: no ID token')
})

t.test('identity refusals: no verified primary email; another user at a refresh', async (t) => {
  const gh = await github(t, {
    users: {
      dave: githubUser(4, {
        emails: [
          { email: 'dave@example.com', primary: true, verified: false },
          { email: 'dave@other.example', primary: false, verified: true },
        ],
      }),
      erin: githubUser(5),
    },
  })
  const identity = new GithubIdentity(gh.url, CONFIG, 2000, log, systemClock)
  const tokens = (login: string) => ({ accessToken: gh.tokenFor(login), expiresAt: undefined, refreshToken: undefined, idToken: undefined, claims: undefined })
  await t.rejects(
    identity.resolve(tokens('dave')),
    { code: 'forbidden', status: 403, message: /no verified primary email/ },
    'a verified address that is not primary does not count',
  )
  await t.rejects(identity.resolve(tokens('erin'), { sub: '4' }), { code: 'refresh_token_invalid' }, 'a refresh about another user ends the session')
  t.match(await identity.resolve(tokens('erin'), { sub: '5' }), { claims: { sub: '5', preferred_username: 'erin' } })
})
