// provider.profile fapi2: the whole sign-in, refresh and logout against oidc-provider configured
// as a FAPI 2.0 provider, and the negatives against a provider that breaks one rule at a time.

import t from 'tap'
import type { Problem } from '#src/contract/errors'
import { startAdversarialStack, type Behaviour } from '../fixtures/adversarial-provider.ts'
import { problems, resolve } from '../fixtures/config/base.ts'
import { problemCode } from '../fixtures/http.ts'
import { fapi2Client, startFapi2Stack } from '../fixtures/fapi2.ts'
import { assertRefusedAtDiscovery, refreshTokenOf } from '../fixtures/stack.ts'

const JSON_ACCEPT = { accept: 'application/json' }
const client = fapi2Client()
const FAPI2 = client.provider

t.test('against oidc-provider as a FAPI 2.0 provider: sign-in, refresh, logout', async (t) => {
  const stack = await startFapi2Stack(t, client, { dpopNonces: true, rotateRefreshTokens: true })
  t.equal(stack.config.providers[0]!.dpop, true, 'the profile turns DPoP on')
  t.equal(stack.config.providers[0]!.pushedAuthorizationRequests, 'required', 'and PAR')
  const metadata = (await (await fetch(`${stack.provider?.issuer}/.well-known/openid-configuration`)).json()) as Record<string, unknown>

  const start = await fetch(`${stack.gw}/api/v1/openid/redirect?performRedirect=false`)
  const url = new URL(((await start.json()) as { value: string }).value)
  t.strictSame([...url.searchParams.keys()].sort(), ['client_id', 'request_uri'], 'pushed')

  const browser = stack.browser()
  const callback = await browser.signIn(`${stack.gw}/api/v1/openid/redirect`, 'alice')
  t.equal(callback.status, 200, 'signed in')
  const accessToken = ((await callback.json()) as { value: string }).value
  const page = await browser.fetch(`${stack.gw}/x`, { headers: JSON_ACCEPT })
  t.equal(page.status, 200)
  t.equal(((await page.json()) as { headers: Record<string, string> }).headers['x-forwarded-user'], 'alice')
  const asBearer = await fetch(String(metadata.userinfo_endpoint), { headers: { authorization: `Bearer ${accessToken}` } })
  t.equal(asBearer.status, 401, 'the access token is sender-constrained: useless as Bearer')

  const refreshed = await browser.fetch(`${stack.gw}/api/v1/openid/refresh`)
  t.equal(refreshed.status, 200, 'refresh')

  const oldCookies = browser.cookieHeader(`${stack.gw}/api/v1/openid/refresh`)
  const refreshToken = refreshTokenOf(stack, oldCookies)
  const issued = stack.provider?.provider.RefreshToken
  t.ok(await issued?.find(refreshToken), 'the provider knows the refresh token')
  const logout = await browser.fetch(`${stack.gw}/api/v1/openid/logout`, { method: 'DELETE' })
  t.equal(logout.status, 200, 'logout')
  t.equal((await browser.fetch(`${stack.gw}/x`, { headers: JSON_ACCEPT })).status, 401, 'the session is gone')
  // The client's only authentication at this provider is private_key_jwt: a revocation that
  // happened came with a client assertion.
  t.notOk(await issued?.find(refreshToken), 'the refresh token was revoked at the provider (with a client assertion)')
  const replay = await fetch(`${stack.gw}/api/v1/openid/refresh`, { headers: { cookie: oldCookies } })
  t.equal(replay.status, 400, 'the copied cookies are refused after the logout')
  t.equal(((await replay.json()) as Problem).code, 'refresh_token_missing')
})

t.test('negatives: a FAPI 2.0 provider that breaks one rule', async (t) => {
  const cases: Array<[name: string, provider: Record<string, unknown>, behaviour: Partial<Behaviour>, status: number, code: string]> = [
    ['control', {}, {}, 200, ''],
    // FAPI 2.0 5.3.2.2 requires iss whatever the provider advertises (authorization-response.ts).
    ['no iss in the authorization response (the provider does not advertise it)', { issParameter: false }, {}, 403, 'authorization_response_invalid'],
    ['another iss in the authorization response', {}, { authorizationIss: 'https://mix-up.example' }, 403, 'authorization_response_invalid'],
    ['an ID token for another audience', {}, { idTokenClaims: { aud: 'someone-else' } }, 403, 'id_token_invalid'],
    ['an unbound (Bearer) access token', {}, { boundTokens: false }, 502, 'provider_unavailable'],
  ]
  for (const [name, provider, behaviour, status, code] of cases) {
    t.test(name, async (t) => {
      const { stack, provider: adversary } = await startAdversarialStack(t, {
        provider: { fapi2: true, signingAlg: 'ES256', ...provider, behaviour },
        config: { provider: FAPI2 },
      })
      const res = await stack.browser().signIn(`${stack.gw}/api/v1/openid/redirect`, 'alice')
      t.equal(res.status, status)
      if (code !== '') t.equal(await problemCode(res), code)
      if (/\biss\b/.test(name)) t.equal(adversary.tokenRequests, 0, 'the code is never sent to the token endpoint')
    })
  }
  t.test('RS256 ID tokens only: not ready (FAPI 2.0 allows PS256, ES256, EdDSA)', async (t) => {
    const lines: string[] = []
    const { stack } = await startAdversarialStack(t, {
      provider: { fapi2: true, signingAlg: 'RS256' },
      config: { provider: FAPI2, log: { level: 'warn' } },
      logStream: { write: (line) => void lines.push(line) },
      waitForProvider: false,
    })
    await assertRefusedAtDiscovery(t, stack.gw, lines, /provider\.profile: fapi2/)
  })
})

t.test('configuration: what fapi2 requires, refused by key', async (t) => {
  t.strictSame(problems({ provider: FAPI2 }), [])
  t.strictSame(problems({ provider: { profile: 'fapi2' } }), ['provider.clientAuthMethod: must be private_key_jwt with provider.profile: fapi2'])
  t.strictSame(problems({ provider: { ...FAPI2, pushedAuthorizationRequests: 'off' } }), [
    'provider.pushedAuthorizationRequests: cannot be off with provider.profile: fapi2, which requires PAR',
  ])
  t.strictSame(problems({ provider: { ...FAPI2, idTokenAlgorithms: ['RS256', 'PS256'] } }), [
    'provider.idTokenAlgorithms: names RS256; provider.profile: fapi2 allows only PS256, ES256, EdDSA, Ed25519',
  ])
  t.strictSame(problems({ provider: { ...FAPI2, bearer: { algorithms: ['RS256'] } } }), [
    'provider.bearer.algorithms: names none of PS256, ES256, EdDSA, Ed25519, the only algorithms provider.profile: fapi2 allows',
  ])
  const config = resolve({ provider: FAPI2 })
  t.strictSame(config.providers[0]!.bearer.algorithms, ['PS256', 'ES256', 'EdDSA', 'Ed25519'], 'Bearer JWTs narrowed to the profile')
})
