import t, { type Test } from 'tap'
import YAML from 'yaml'
import type { Browser } from '../fixtures/browser.ts'
import { manualClock } from '../fixtures/clock.ts'
import { checkRequestFor, sendCheck } from '../fixtures/envoy.ts'
import { checkRequest, serveGatewayGrpc, type ExtAuthzClient } from '../fixtures/ext-authz-grpc.ts'
import { githubUser, PERMISSIONS, startGithub, type GithubFixture } from '../fixtures/github.ts'
import { problemCode, rawRequest } from '../fixtures/http.ts'
import { recipe } from '../fixtures/markdown.ts'
import { startStack, type Stack, type StackOptions } from '../fixtures/stack.ts'

// GitHub as a provider (provider.github, docs/providers/github.md) against the GitHub fixture
// (test/fixtures/github.ts, GitHub's documented rules): the sign-in through openid-client's plain
// OAuth 2.0 (state and PKCE, no nonce, no ID token), the user from the REST API, the access lists,
// groups as `org` and `org/team` under the same `allow` rules at every exit (proxy, forward-auth,
// Envoy HTTP and gRPC), a GitHub App's expiring tokens refreshed through the refresh path, and
// every refusal: not admitted, no verified email, GitHub down, rate-limited, a token error in a
// 200 answer, a denied app.

const APP = 'app.example.com'
const UPSTREAMS = [
  { name: 'app', match: { pathPrefix: '/', hosts: [APP] } },
  { name: 'admin', match: { pathPrefix: '/admin', hosts: [APP] }, allow: { groups: ['acme/admins'] } },
  { name: 'org', match: { pathPrefix: '/acme', hosts: [APP] }, allow: { groups: ['acme'] } },
]
const JSON_ACCEPT = { accept: 'application/json' }

const USERS = {
  alice: githubUser(101, { name: 'Alice', orgs: ['acme'], teams: ['acme/admins', 'acme/devs'] }),
  bob: githubUser(102, { orgs: ['acme'], teams: ['acme/devs'] }),
  carol: githubUser(103, { orgs: ['globex'], teams: ['globex/admins'] }),
  // Admitted by the second test's lists (globex) but for the email.
  dave: githubUser(104, { orgs: ['acme', 'globex'], emails: [{ email: 'dave@example.com', primary: true, verified: false }] }),
  erin: githubUser(105),
  frank: githubUser(106, { repos: { 'acme/private-repo': { private: true, permissions: PERMISSIONS.read } } }),
  gina: githubUser(107, { repos: { 'acme/public-repo': { private: false, permissions: PERMISSIONS.read } } }),
}

/** A stack whose provider is the GitHub fixture, with `github` as provider.github. */
async function githubStack(t: Test, github: Record<string, unknown>, options: Partial<StackOptions> = {}): Promise<{ stack: Stack; gh: GithubFixture }> {
  const gh = await startGithub({ users: USERS })
  t.teardown(() => gh.close())
  const stack = await startStack(t, {
    issuer: gh.url,
    upstreams: UPSTREAMS,
    ...options,
    config: {
      redirects: { allowedHosts: [APP] },
      // The stack's OpenID Connect keys, which check refuses on a GitHub provider, are left out.
      provider: {
        clientId: gh.clientId,
        clientSecret: gh.clientSecret,
        scopes: undefined,
        offlineAccess: undefined,
        postLogoutRedirectUri: undefined,
        userClaim: 'preferred_username',
        github,
      },
      ...options.config,
    },
  })
  gh.register(`${stack.gw}/api/v1/openid/callback`)
  // The stack waits for the providers it started itself only; GitHub's metadata is the gateway's own, loaded in the background all the same.
  await stack.app.providersReady
  return { stack, gh }
}

/** Signs in as `login` at the fixture; returns the browser and the gateway's answer to the callback. */
async function signIn(stack: Stack, gh: GithubFixture, login: string): Promise<{ browser: Browser; callback: Response }> {
  gh.set({ signInAs: login })
  const browser = stack.browser()
  const callback = await browser.signIn(`${stack.gw}/api/v1/openid/redirect`, login)
  return { browser, callback }
}

async function cookiesOf(stack: Stack, gh: GithubFixture, login: string): Promise<string> {
  const { browser, callback } = await signIn(stack, gh, login)
  if (callback.status !== 200) throw new Error(`sign-in of ${login} failed with ${callback.status}: ${await callback.text()}`)
  return browser
    .cookieHeader(`${stack.gw}/`)
    .split('; ')
    .filter((pair) => pair.startsWith('ogw'))
    .join('; ')
}

/** The problem code and status of a refused sign-in (the callback's answer). */
async function refusal(stack: Stack, gh: GithubFixture, login: string): Promise<{ status: number; code: string | undefined; retryAfter: string | null }> {
  const { callback } = await signIn(stack, gh, login)
  return { status: callback.status, retryAfter: callback.headers.get('retry-after'), code: await problemCode(callback) }
}

type Verdict = `allow:${string}` | 'sign_in' | 'refused' | 'unavailable'

function fromStatus(status: number, user: unknown): Verdict {
  if (status === 200) return `allow:${typeof user === 'string' ? user : ''}`
  if (status === 401 || status === 302) return 'sign_in'
  if (status === 403) return 'refused'
  if (status >= 500) return 'unavailable'
  return `allow:unexpected ${status}` as Verdict
}

/** The four exits a request rule concerns, as one-decision.test.ts asks them. */
const EXITS: Record<string, (stack: Stack, grpc: ExtAuthzClient, path: string, headers: Record<string, string>) => Promise<Verdict>> = {
  async proxy(stack, _grpc, path, headers) {
    const res = await rawRequest(stack.gw, path, { headers: { host: APP, ...headers } })
    const echoed = res.status === 200 ? res.json<{ headers?: Record<string, string> }>().headers : undefined
    return echoed !== undefined ? `allow:${echoed['x-forwarded-user'] ?? ''}` : fromStatus(res.status, undefined)
  },
  async 'forward-auth'(stack, _grpc, path, headers) {
    const res = await rawRequest(stack.gw, '/api/v1/openid/auth', {
      headers: { ...headers, 'x-forwarded-method': 'GET', 'x-forwarded-host': APP, 'x-forwarded-uri': path, 'x-forwarded-proto': 'https' },
    })
    return fromStatus(res.status, res.headers['x-auth-request-user'])
  },
  async 'envoy http'(stack, _grpc, path, headers) {
    const res = await sendCheck(stack.gw, checkRequestFor({ method: 'GET', path, headers: { host: APP, ...headers } }))
    return fromStatus(res.status, res.headers['x-forwarded-user'])
  },
  async 'envoy grpc'(_stack, grpc, path, headers) {
    const res = await grpc.check(checkRequest({ method: 'GET', host: APP, path, scheme: 'https', headers }))
    const code = res.status?.code
    if (code === 0) return `allow:${res.ok_response?.headers.find((o) => o.header.key === 'x-forwarded-user')?.header.value ?? ''}`
    return code === 16 ? 'sign_in' : code === 7 ? 'refused' : code === 14 ? 'unavailable' : (`allow:unexpected code ${String(code)}` as Verdict)
  },
}

async function agree(
  t: Test,
  stack: Stack,
  grpc: ExtAuthzClient,
  name: string,
  path: string,
  headers: Record<string, string>,
  expected: Verdict,
): Promise<void> {
  const answers: Record<string, Verdict> = {}
  for (const [exit, ask] of Object.entries(EXITS)) answers[exit] = await ask(stack, grpc, path, { ...JSON_ACCEPT, ...headers })
  t.strictSame(answers, Object.fromEntries(Object.keys(EXITS).map((e) => [e, expected])), name)
}

t.test('a GitHub sign-in: plain OAuth 2.0 with state and PKCE, the user from the REST API, groups under allow at every exit', async (t) => {
  const { stack, gh } = await githubStack(t, { organizations: ['acme'] })
  const grpc = await serveGatewayGrpc(t, stack)
  const alice = await cookiesOf(stack, gh, 'alice')
  const bob = await cookiesOf(stack, gh, 'bob')

  const authorize = new URLSearchParams(gh.requests.find((r) => r.path === '/login/oauth/authorize')?.search ?? '')
  t.equal(authorize.get('client_id'), gh.clientId)
  t.equal(authorize.get('scope'), 'read:user user:email read:org', 'github.scopes, not OpenID Connect scopes')
  t.equal(authorize.get('code_challenge_method'), 'S256', 'PKCE S256')
  t.ok(authorize.get('state'), 'state')
  t.equal(authorize.get('nonce'), null, 'no nonce: there is no ID token to carry it')
  const exchange = new URLSearchParams(gh.requests.find((r) => r.path === '/login/oauth/access_token')?.body ?? '')
  t.ok(exchange.get('code_verifier'), 'the code verifier is sent')
  t.equal(exchange.get('client_secret'), gh.clientSecret, 'the secret in the form body, as GitHub documents')
  const api = gh.requests.filter((r) => r.path.startsWith('/api/v3/'))
  t.ok(api.length >= 4, 'the REST API was asked')
  t.ok(
    api.every((r) => r.authorization?.startsWith('Bearer ghu_') === true && r.userAgent === 'openid-gateway' && r.accept === 'application/vnd.github+json'),
    "each API request has the user's token, a User-Agent and GitHub's media type",
  )
  t.ok(
    api.filter((r) => r.path !== '/api/v3/user').every((r) => new URLSearchParams(r.search).get('per_page') === '100'),
    'lists are asked 100 a page',
  )

  const page = await rawRequest(stack.gw, '/page', { headers: { host: APP, ...JSON_ACCEPT, cookie: alice } })
  const seen = page.json<{ headers: Record<string, string> }>().headers
  t.equal(seen['x-forwarded-user'], 'alice', 'userClaim: preferred_username is the login')
  t.equal(seen['x-forwarded-email'], 'user101@example.com', 'the verified primary email')
  t.equal(seen['x-forwarded-groups'], 'acme,acme/admins,acme/devs', 'organizations as org, teams as org/team-slug')
  t.equal(seen['x-forwarded-preferred-username'], 'alice')

  const userinfo = await rawRequest(stack.gw, '/api/v1/openid/userinfo', { headers: { host: APP, ...JSON_ACCEPT, cookie: alice } })
  t.match(userinfo.json(), { user: 'alice', email: 'user101@example.com', groups: ['acme', 'acme/admins', 'acme/devs'], preferredUsername: 'alice' })

  await agree(t, stack, grpc, 'a member of the team', '/admin/users', { cookie: alice }, 'allow:alice')
  await agree(t, stack, grpc, 'not in the team', '/admin/users', { cookie: bob }, 'refused')
  await agree(t, stack, grpc, 'a member of the organization (group `acme`)', '/acme/x', { cookie: bob }, 'allow:bob')
  await agree(t, stack, grpc, 'no session', '/page', {}, 'sign_in')
  // GitHub's tokens are opaque and GitHub has no introspection endpoint: no Bearer token signs in.
  const token = gh.requests.find((r) => r.authorization?.startsWith('Bearer ghu_') === true)?.authorization ?? ''
  await agree(t, stack, grpc, "a GitHub user's own token as Bearer", '/page', { authorization: token }, 'sign_in')
  const jwt = `${Buffer.from('{"alg":"RS256"}').toString('base64url')}.${Buffer.from(`{"iss":"${gh.url}","sub":"101"}`).toString('base64url')}.c2ln`
  await agree(t, stack, grpc, 'a JWT naming GitHub as issuer', '/page', { authorization: `Bearer ${jwt}` }, 'sign_in')
})

t.test('who provider.github admits, and every refusal of a sign-in', async (t) => {
  const { stack, gh } = await githubStack(t, {
    organizations: ['globex'],
    teams: ['acme/admins'],
    repositories: ['acme/private-repo', 'acme/public-repo'],
    users: ['ERIN'],
  })
  t.equal((await signIn(stack, gh, 'alice')).callback.status, 200, 'a team member')
  t.equal((await signIn(stack, gh, 'carol')).callback.status, 200, 'an organization member')
  t.equal((await signIn(stack, gh, 'erin')).callback.status, 200, 'a listed user (logins compared without case)')
  t.equal((await signIn(stack, gh, 'frank')).callback.status, 200, 'a reader of a private repository')
  t.strictSame(await refusal(stack, gh, 'bob'), { status: 403, code: 'forbidden', retryAfter: null }, 'in the organization, not in the team')
  t.strictSame(await refusal(stack, gh, 'gina'), { status: 403, code: 'forbidden', retryAfter: null }, 'a reader of a public repository is no collaborator')
  t.strictSame(await refusal(stack, gh, 'dave'), { status: 403, code: 'forbidden', retryAfter: null }, 'no verified primary email')

  gh.set({ apiStatus: 503 })
  t.strictSame(await refusal(stack, gh, 'alice'), { status: 502, code: 'provider_unavailable', retryAfter: null }, 'GitHub down')
  gh.set({ apiStatus: undefined, rateLimit: { kind: 'primary', status: 403, count: 1, resetInSeconds: 120, retryAfter: 0 } })
  const primary = await refusal(stack, gh, 'alice')
  t.match(primary, { status: 502, code: 'provider_unavailable' }, 'the primary rate limit (403, x-ratelimit-remaining 0)')
  t.ok(Number(primary.retryAfter) >= 118 && Number(primary.retryAfter) <= 121, `Retry-After until x-ratelimit-reset: ${String(primary.retryAfter)}`)
  gh.set({ rateLimit: { kind: 'secondary', status: 429, count: 1, resetInSeconds: 0, retryAfter: 42 } })
  t.strictSame(await refusal(stack, gh, 'alice'), { status: 502, code: 'provider_unavailable', retryAfter: '42' }, 'a secondary rate limit (429, retry-after)')
  gh.set({ rateLimit: { kind: 'secondary', status: 403, count: 1, resetInSeconds: 0, retryAfter: 7 } })
  t.strictSame(await refusal(stack, gh, 'alice'), { status: 502, code: 'provider_unavailable', retryAfter: '7' }, 'a secondary rate limit (403, retry-after)')
  gh.set({ rateLimit: undefined })
  t.equal((await signIn(stack, gh, 'alice')).callback.status, 200, 'and once GitHub answers again, the sign-in works')

  gh.set({ tokenError: 'bad_verification_code' })
  t.strictSame(await refusal(stack, gh, 'alice'), { status: 403, code: 'code_invalid', retryAfter: null }, 'a token error answered with HTTP 200')
  gh.set({ tokenError: 'incorrect_client_credentials' })
  t.strictSame(
    await refusal(stack, gh, 'alice'),
    { status: 502, code: 'provider_rejected_client', retryAfter: null },
    "the gateway's credentials refused (HTTP 200)",
  )
  gh.set({ tokenError: undefined, deny: true })
  // The product's answer to any provider's refusal of the authorization request (RFC 6749 4.1.2.1).
  t.strictSame(await refusal(stack, gh, 'alice'), { status: 400, code: 'code_missing', retryAfter: null }, 'the user denied the app (error=access_denied)')
})

t.test("a GitHub App's expiring user tokens are refreshed through the refresh path, and membership is read again", async (t) => {
  const clock = manualClock()
  const { stack, gh } = await githubStack(t, { organizations: ['acme'] }, { clock })
  gh.set({ expiring: true, expiresIn: 60 })
  const alice = await cookiesOf(stack, gh, 'alice')
  const ask = async (cookie: string): Promise<number> => (await rawRequest(stack.gw, '/page', { headers: { host: APP, ...JSON_ACCEPT, cookie } })).status
  t.equal(await ask(alice), 200)
  const refreshes = (): number => gh.requests.filter((r) => r.path === '/login/oauth/access_token' && r.body.includes('grant_type=refresh_token')).length
  t.equal(refreshes(), 0)

  clock.advance(61_000)
  t.equal(await ask(alice), 200, 'past expires_in: refreshed, the session goes on')
  t.equal(refreshes(), 1, 'one refresh grant at GitHub')
  const refresh = new URLSearchParams(gh.requests.filter((r) => r.body.includes('grant_type=refresh_token')).at(-1)?.body ?? '')
  t.ok(refresh.get('refresh_token')?.startsWith('ghr_'), "GitHub's refresh token")
  t.equal(refresh.get('client_secret'), gh.clientSecret)

  // GitHub's API rate-limited at a refresh: 502, as any provider fault (fail closed: the memberships
  // could not be read again). GitHub has already rotated the refresh token the gateway redeemed, so
  // the next refresh is refused (bad_refresh_token) and the session ends: the user signs in again.
  const bob = await cookiesOf(stack, gh, 'bob')
  clock.advance(61_000)
  gh.set({ rateLimit: { kind: 'secondary', status: 429, count: 1, resetInSeconds: 0, retryAfter: 30 } })
  const limited = await rawRequest(stack.gw, '/page', { headers: { host: APP, ...JSON_ACCEPT, cookie: bob } })
  t.equal(limited.status, 502, 'rate-limited at a refresh: 502')
  t.equal(limited.headers['retry-after'], '30', "with GitHub's Retry-After")
  t.equal(await ask(bob), 401, 'the rotated-out refresh token is refused at the next refresh: signed out, never let through')

  // Removed from the organization: the next refresh reads the memberships again, and ends the session.
  USERS.alice.orgs = []
  t.teardown(() => {
    USERS.alice.orgs = ['acme']
  })
  clock.advance(61_000)
  t.equal(await ask(alice), 401, 'no longer admitted: the session ends at its refresh')
  USERS.alice.orgs = ['acme']
  const attempts = refreshes()
  t.equal(await ask(alice), 401, 'and stays ended, admitted again or not')
  t.equal(refreshes(), attempts, 'ended, not only refused: no refresh is attempted with it again')

  // A refresh token GitHub no longer takes (bad_refresh_token, with HTTP 200) ends the session too.
  const again = await cookiesOf(stack, gh, 'alice')
  const used = gh.requests.filter((r) => r.path === '/login/oauth/access_token').length
  // As GitHub once refresh_token_expires_in has passed.
  gh.revokeRefreshTokens()
  clock.advance(61_000)
  t.equal(await ask(again), 401, 'bad_refresh_token ends the session')
  t.equal(gh.requests.filter((r) => r.path === '/login/oauth/access_token').length, used + 1, 'after one refresh attempt')
})

t.test("docs/providers/github.md's configuration, as written, against the fixture", async (t) => {
  const page = YAML.parse(recipe('docs/providers/github.md', 'yaml')) as { provider: { userClaim: string; github: Record<string, unknown> } }
  t.equal(page.provider.userClaim, 'preferred_username', "the page's userClaim, which githubStack sets")
  const { stack, gh } = await githubStack(t, page.provider.github)
  USERS.alice.teams.push('acme/platform-admins')
  t.teardown(() => {
    USERS.alice.teams = USERS.alice.teams.filter((team) => team !== 'acme/platform-admins')
  })
  const alice = await cookiesOf(stack, gh, 'alice')
  const seen = (await rawRequest(stack.gw, '/page', { headers: { host: APP, ...JSON_ACCEPT, cookie: alice } })).json<{ headers: Record<string, string> }>()
  t.equal(seen.headers['x-forwarded-user'], 'alice', 'userClaim: preferred_username')
  t.match(seen.headers['x-forwarded-groups'], /(^|,)acme\/platform-admins(,|$)/)
  t.equal((await signIn(stack, gh, 'carol')).callback.status, 403, 'in none of its lists: refused')
})
