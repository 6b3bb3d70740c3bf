import { createServer, type IncomingHttpHeaders } from 'node:http'
import type { AddressInfo } from 'node:net'
import t from 'tap'
import { SignJWT, generateKeyPair } from 'jose'
import { startStack, type Stack, type Teardown } from '../fixtures/stack.ts'
import { startTestProvider } from '../fixtures/provider.ts'
import { startAdversarialStack, SUBJECT } from '../fixtures/adversarial-provider.ts'
import { groupIds, startMicrosoftGraph } from '../fixtures/microsoft-graph.ts'

// Claims from beyond the ID token (provider.claimSources, src/oidc/claim-sources.ts) against real
// peers: oidc-provider keeping the profile out of the ID token (Core 5.4) and naming aggregated
// and distributed sources (Core 5.6.2); the adversarial provider for a UserInfo about another
// user; the Microsoft Graph fixture for Entra ID's group overage.

const JSON_ACCEPT = { headers: { accept: 'application/json' } }

/** The headers the upstream received for a page this browser asked for. */
async function upstreamSees(stack: Stack, browser: ReturnType<Stack['browser']>): Promise<IncomingHttpHeaders> {
  const page = await browser.fetch(`${stack.gw}/page`, JSON_ACCEPT)
  await page.body?.cancel()
  return page.status === 200 ? (stack.upstream.requests.at(-1)?.headers ?? {}) : { status: String(page.status) }
}

/** A claims endpoint (Core 5.6.2 distributed claims): answers `jwt()` as application/jwt, and records what it was sent. */
async function claimsEndpoint(t: Teardown, jwt: () => Promise<string>): Promise<{ url: string; requests: IncomingHttpHeaders[] }> {
  const requests: IncomingHttpHeaders[] = []
  const server = createServer((req, res) => {
    requests.push(req.headers)
    void jwt().then((body) => res.writeHead(200, { 'content-type': 'application/jwt' }).end(body))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/claims`, requests }
}

t.test('UserInfo: claims the ID token leaves out reach the identity headers, at sign-in and again at refresh', async (t) => {
  let email = 'alice@example.com'
  const provider = {
    conformIdTokenClaims: true,
    accountClaims: (sub: string) => ({ sub, email, email_verified: true, preferred_username: sub, groups: ['admins', 'staff'] }),
  }
  for (const userInfo of [false, true]) {
    const stack = await startStack(t, { provider, config: { provider: { claimSources: { userInfo } } } })
    const browser = stack.browser()
    t.equal((await browser.signIn(`${stack.gw}/api/v1/openid/redirect`, 'alice')).status, 200)
    const seen = await upstreamSees(stack, browser)
    if (!userInfo) {
      // The ID token carries sub alone (conformIdTokenClaims): without UserInfo there is nothing more.
      t.equal(seen['x-forwarded-email'], undefined, 'without userInfo: no email')
      continue
    }
    t.equal(seen['x-forwarded-user'], 'alice')
    t.equal(seen['x-forwarded-email'], 'alice@example.com', 'email from UserInfo')
    t.equal(seen['x-forwarded-groups'], 'admins,staff', 'groups from UserInfo')
    t.equal(seen['x-forwarded-preferred-username'], 'alice')
    email = 'alice.new@example.com'
    t.equal((await browser.fetch(`${stack.gw}/api/v1/openid/refresh`, JSON_ACCEPT)).status, 200, 'refreshed')
    t.equal((await upstreamSees(stack, browser))['x-forwarded-email'], 'alice.new@example.com', 'UserInfo asked again at refresh')
  }
})

t.test('UserInfo with a DPoP-bound session: the call carries the proof, with the provider nonce, at sign-in and refresh (RFC 9449 7.1, 8)', async (t) => {
  const stack = await startStack(t, {
    provider: { conformIdTokenClaims: true, rotateRefreshTokens: true, dpopNonces: true },
    client: { dpopBoundAccessTokens: true },
    config: { provider: { dpop: true, claimSources: { userInfo: true } } },
  })
  const browser = stack.browser()
  t.equal((await browser.signIn(`${stack.gw}/api/v1/openid/redirect`, 'bob')).status, 200)
  t.equal((await upstreamSees(stack, browser))['x-forwarded-email'], 'bob@example.com', 'UserInfo accepted the DPoP-bound token')
  t.equal((await browser.fetch(`${stack.gw}/api/v1/openid/refresh`, JSON_ACCEPT)).status, 200, 'refreshed')
  t.equal((await upstreamSees(stack, browser))['x-forwarded-groups'], 'staff')
})

t.test('UserInfo about another sub is refused (502, Core 5.3.2): no session, nothing merged', async (t) => {
  const { stack, provider } = await startAdversarialStack(t, {
    provider: { userinfoEndpoint: true },
    config: { provider: { claimSources: { userInfo: true } } },
  })
  provider.set({ userinfoClaims: { sub: 'someone-else', email: 'someone@example.com' } })
  const browser = stack.browser()
  const refused = await browser.signIn(`${stack.gw}/api/v1/openid/redirect`, 'unused')
  t.equal(refused.status, 502)
  t.equal(provider.userinfoRequests, 1, 'UserInfo was asked')
  const page = await browser.fetch(`${stack.gw}/page`, JSON_ACCEPT)
  t.equal(page.status, 401, 'not signed in')
  await page.body?.cancel()
  t.notOk(
    stack.upstream.requests.some((r) => r.headers['x-forwarded-email'] === 'someone@example.com'),
    'the mismatching answer never reached an upstream',
  )

  provider.set({ userinfoClaims: { sub: SUBJECT, name: 'Ada' } })
  t.equal((await browser.signIn(`${stack.gw}/api/v1/openid/redirect`, 'unused')).status, 200, 'the same user: signed in')

  // A signed UserInfo response, which the gateway did not register for (userinfo_signed_response_alg): refused, never read unverified.
  provider.set({ userinfoSigned: true })
  const signed = stack.browser()
  t.equal((await signed.signIn(`${stack.gw}/api/v1/openid/redirect`, 'unused')).status, 502, 'a signed UserInfo response is refused')
})

t.test('a UserInfo failure at refresh is a 502: the session keeps the claims it had, nothing is merged', async (t) => {
  const { stack, provider } = await startAdversarialStack(t, {
    provider: { userinfoEndpoint: true },
    config: { provider: { claimSources: { userInfo: true } } },
  })
  provider.set({ userinfoClaims: { email: 'first@example.com' } })
  const browser = stack.browser()
  t.equal((await browser.signIn(`${stack.gw}/api/v1/openid/redirect`, 'unused')).status, 200)
  t.equal((await upstreamSees(stack, browser))['x-forwarded-email'], 'first@example.com', 'UserInfo wins over the ID token')
  provider.set({ userinfoClaims: { sub: 'someone-else', email: 'someone@example.com' } })
  const refreshed = await browser.fetch(`${stack.gw}/api/v1/openid/refresh`, JSON_ACCEPT)
  t.equal(refreshed.status, 502)
  await refreshed.body?.cancel()
  t.equal((await upstreamSees(stack, browser))['x-forwarded-email'], 'first@example.com', "the sign-in's claims stand")
})

t.test('aggregated and distributed claims: trusted sources verified and merged, others never fetched', async (t) => {
  // The claims provider: a real oidc-provider, whose keys (through its discovery) verify its JWTs.
  const claimsProvider = await startTestProvider(t, { clients: [] })
  const distributed = await claimsEndpoint(t, () => claimsProvider.signJwt({ email: 'distributed@example.com' }))
  const untrusted = await claimsEndpoint(t, () => claimsProvider.signJwt({ email_verified: false }))
  const stranger = await generateKeyPair('ES256')
  const strangerJwt = await new SignJWT({ preferred_username: 'root' })
    .setProtectedHeader({ alg: 'ES256' })
    .setIssuer('https://stranger.example')
    .sign(stranger.privateKey)
  const aggregated = await claimsProvider.signJwt({ groups: ['from-aggregated'], sub: 'not-taken' })
  const lines: string[] = []
  const stack = await startStack(t, {
    provider: {
      accountClaims: (sub: string) => ({
        sub,
        _claim_names: { groups: 'agg', email: 'dist', preferred_username: 'stranger', email_verified: 'elsewhere' },
        _claim_sources: {
          agg: { JWT: aggregated },
          dist: { endpoint: distributed.url, access_token: 'source-token' },
          stranger: { JWT: strangerJwt },
          elsewhere: { endpoint: untrusted.url },
        },
      }),
    },
    config: { provider: { claimSources: { trustedIssuers: [claimsProvider.issuer], trustedEndpoints: [distributed.url] } }, log: { level: 'warn' } },
    logStream: { write: (line: string) => void lines.push(line) },
  })
  const browser = stack.browser()
  t.equal((await browser.signIn(`${stack.gw}/api/v1/openid/redirect`, 'alice')).status, 200)
  const seen = await upstreamSees(stack, browser)
  t.equal(seen['x-forwarded-user'], 'alice', 'a source never sets sub')
  t.equal(seen['x-forwarded-groups'], 'from-aggregated', 'aggregated JWT verified against its issuer')
  t.equal(seen['x-forwarded-email'], 'distributed@example.com', 'distributed endpoint fetched')
  t.equal(seen['x-forwarded-preferred-username'], undefined, 'an untrusted issuer is ignored')
  t.equal(distributed.requests.length, 1)
  t.equal(distributed.requests[0]?.authorization, 'Bearer source-token', "with the source's own access token")
  t.equal(untrusted.requests.length, 0, 'an untrusted endpoint is never fetched')
  t.ok(
    lines.some((l) => l.includes('distributed claims from an untrusted endpoint ignored (not fetched)')),
    'the untrusted endpoint is logged',
  )
  t.ok(
    lines.some((l) => l.includes('claims from an untrusted issuer ignored')),
    'the untrusted issuer is logged',
  )
})

t.test('Entra ID group overage: the groups come from Microsoft Graph, paged and throttled', async (t) => {
  const graph = await startMicrosoftGraph({ groups: groupIds(250), pageSize: 100, throttle: 1, retryAfter: '1' })
  t.teardown(() => graph.close())
  const { stack, provider } = await startAdversarialStack(t, {
    config: {
      session: { store: 'memory' },
      provider: { claimSources: { entraGroupOverage: true, graphBaseUrl: graph.url } },
    },
    upstreams: [{ name: 'app', allow: { groups: [groupIds(250).at(-1)] } }],
  })
  // The marker Entra ID puts in place of `groups` past 200 (its URL is never fetched).
  provider.set({
    idTokenClaims: {
      _claim_names: { groups: 'src1' },
      _claim_sources: { src1: { endpoint: 'https://graph.windows.net/tenant/users/oid/getMemberObjects' } },
    },
  })
  const browser = stack.browser()
  t.equal((await browser.signIn(`${stack.gw}/api/v1/openid/redirect`, 'unused')).status, 200, 'the last page holds the group the allow rule needs')
  t.equal((await upstreamSees(stack, browser))['x-forwarded-groups'], groupIds(250).join(','))
  t.equal(graph.requests.length, 4, 'one 429 waited out, then three pages')
  t.ok(
    graph.requests.every((r) => r.authorization?.startsWith('Bearer ')),
    "with the session's access token",
  )

  // A refresh reads them again (this provider's refresh brings no ID token, so no marker either).
  graph.set({ groups: groupIds(251) })
  t.equal((await browser.fetch(`${stack.gw}/api/v1/openid/refresh`, JSON_ACCEPT)).status, 200, 'refreshed')
  t.equal((await upstreamSees(stack, browser))['x-forwarded-groups'], groupIds(251).join(','), 'the groups of the refresh')

  // Graph refusing the token fails the sign-in (502): no session without its groups.
  graph.set({ acceptToken: () => false })
  const other = stack.browser()
  t.equal((await other.signIn(`${stack.gw}/api/v1/openid/redirect`, 'unused')).status, 502)
})
