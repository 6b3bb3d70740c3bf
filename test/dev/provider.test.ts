import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import * as jose from 'jose'
import * as oidc from 'openid-client'
import t from 'tap'
import { Browser } from '../fixtures/browser.ts'
import { startTestProvider, type DevProvider, type DevProviderOptions, type Teardown } from '../fixtures/provider.ts'

const CLIENT_ID = 'test-rp'
const CLIENT_SECRET = 'test-rp-secret-that-is-long-enough'

interface RelyingParty {
  origin: string
  /** The callback URLs the provider sent the browser to, in order. */
  callbacks: string[]
  /** Paths answered by a redirect to a given URL (set per test). */
  starts: Map<string, string>
  /** Back-channel logout tokens received at /backchannel. */
  logoutTokens: string[]
}

// A throwaway relying party: /start/* redirects to whatever authorization URL the test prepared,
// /cb records the callback URL, /backchannel records logout tokens. The test itself plays the
// client with openid-client, exactly as the gateway will.
async function startRelyingParty(t: Teardown): Promise<RelyingParty> {
  const rp: RelyingParty = { origin: '', callbacks: [], starts: new Map(), logoutTokens: [] }
  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', rp.origin)
    const target = rp.starts.get(url.pathname)
    if (target !== undefined) {
      res.writeHead(302, { location: target }).end()
    } else if (url.pathname === '/cb') {
      rp.callbacks.push(url.href)
      res.writeHead(200, { 'content-type': 'text/plain' }).end('callback received')
    } else if (url.pathname === '/backchannel' && req.method === 'POST') {
      let body = ''
      req.on('data', (chunk: Buffer) => (body += chunk.toString()))
      req.on('end', () => {
        rp.logoutTokens.push(new URLSearchParams(body).get('logout_token') ?? '')
        res.writeHead(200).end()
      })
    } else {
      res.writeHead(200, { 'content-type': 'text/plain' }).end('relying party home')
    }
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  rp.origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  t.teardown(() => {
    server.closeAllConnections()
    return new Promise<void>((resolve) => server.close(() => resolve()))
  })
  return rp
}

async function setup(t: Teardown, options: Partial<DevProviderOptions> = {}): Promise<{ idp: DevProvider; rp: RelyingParty; config: oidc.Configuration }> {
  const rp = await startRelyingParty(t)
  const idp = await startTestProvider(t, {
    clients: [
      {
        clientId: CLIENT_ID,
        clientSecret: CLIENT_SECRET,
        redirectUris: [`${rp.origin}/cb`],
        postLogoutRedirectUris: [`${rp.origin}/`],
        backchannelLogoutUri: `${rp.origin}/backchannel`,
      },
    ],
    ...options,
  })
  const config = await oidc.discovery(new URL(idp.issuer), CLIENT_ID, undefined, oidc.ClientSecretBasic(CLIENT_SECRET), {
    execute: [oidc.allowInsecureRequests],
  })
  return { idp, rp, config }
}

interface SignedIn {
  tokens: Awaited<ReturnType<typeof oidc.authorizationCodeGrant>>
  browser: Browser
  callbackUrl: string
}

async function signIn(
  { rp, config }: { rp: RelyingParty; config: oidc.Configuration },
  username: string,
  extra: Record<string, string> = { prompt: 'consent' },
  browser = new Browser(),
): Promise<SignedIn> {
  const verifier = oidc.randomPKCECodeVerifier()
  const state = oidc.randomState()
  const nonce = oidc.randomNonce()
  const authUrl = oidc.buildAuthorizationUrl(config, {
    redirect_uri: `${rp.origin}/cb`,
    scope: 'openid profile email groups offline_access',
    code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
    code_challenge_method: 'S256',
    state,
    nonce,
    ...extra,
  })
  const startPath = `/start/${state}`
  rp.starts.set(startPath, authUrl.href)
  const response = await browser.signIn(`${rp.origin}${startPath}`, username)
  if (response.status !== 200) throw new Error(`callback answered ${response.status}`)
  const callbackUrl = rp.callbacks.at(-1) ?? ''
  const tokens = await oidc.authorizationCodeGrant(config, new URL(callbackUrl), {
    pkceCodeVerifier: verifier,
    expectedState: state,
    expectedNonce: nonce,
    idTokenExpected: true,
  })
  return { tokens, browser, callbackUrl }
}

t.test('discovery document and JWKS are served', async (t) => {
  const { idp } = await setup(t)
  t.match(idp.issuer, /^http:\/\/127\.0\.0\.1:\d+$/, 'issuer carries the real port, no trailing slash')
  t.equal(idp.port, Number(new URL(idp.issuer).port))

  const res = await fetch(`${idp.issuer}/.well-known/openid-configuration`)
  t.equal(res.status, 200)
  const doc = (await res.json()) as Record<string, unknown>
  t.equal(doc.issuer, idp.issuer)
  t.ok(doc.authorization_endpoint, 'authorization endpoint')
  t.ok(doc.token_endpoint, 'token endpoint')
  t.ok(doc.revocation_endpoint, 'revocation endpoint (revocation enabled)')
  t.ok(doc.end_session_endpoint, 'end-session endpoint (rpInitiatedLogout enabled)')
  t.equal(doc.backchannel_logout_supported, true)
  t.same(doc.code_challenge_methods_supported, ['S256'])
  t.ok(Array.isArray(doc.scopes_supported))
  for (const scope of ['openid', 'offline_access', 'email', 'profile', 'groups']) {
    t.ok((doc.scopes_supported as string[]).includes(scope), `scope ${scope} supported`)
  }
  t.ok((doc.claims_supported as string[]).includes('groups'), 'groups claim supported')

  const jwks = (await (await fetch(doc.jwks_uri as string)).json()) as { keys: jose.JWK[] }
  t.equal(jwks.keys.length, 1)
  const served = jwks.keys[0]
  const mine = idp.jwks.keys[0]
  t.equal(served?.kid, mine?.kid, 'served key is the one exposed as jwks')
  t.equal(served?.n, mine?.n)
  t.equal(served?.d, undefined, 'the private part is not served')
  t.ok(mine?.d, 'the exposed jwks is the private one')
})

t.test('signJwt tokens verify against the served JWKS', async (t) => {
  const { idp } = await setup(t)
  const keySet = jose.createRemoteJWKSet(new URL(`${idp.issuer}/jwks`))

  const token = await idp.signJwt({ sub: 'alice', aud: CLIENT_ID, scope: 'openid' })
  const { payload, protectedHeader } = await jose.jwtVerify(token, keySet, { issuer: idp.issuer, audience: CLIENT_ID })
  t.equal(payload.sub, 'alice')
  t.equal(protectedHeader.alg, 'RS256')
  t.equal(protectedHeader.kid, idp.jwks.keys[0]?.kid)
  t.ok(typeof payload.exp === 'number' && payload.exp > Date.now() / 1000, 'exp defaults to the future')

  const typed = await idp.signJwt({ sub: 'alice' }, { typ: 'at+jwt' })
  t.equal((await jose.jwtVerify(typed, keySet)).protectedHeader.typ, 'at+jwt', 'typ header')

  // The served key is marked alg RS256, so a JWKS-respecting verifier refuses PS256 with it.
  const ps = await idp.signJwt({ sub: 'alice' }, { alg: 'PS256' })
  t.equal(jose.decodeProtectedHeader(ps).alg, 'PS256')
  await t.rejects(jose.jwtVerify(ps, keySet), { code: 'ERR_JWKS_NO_MATCHING_KEY' })

  const expired = await idp.signJwt({ sub: 'alice' }, { expiresIn: -60 })
  await t.rejects(jose.jwtVerify(expired, keySet), { code: 'ERR_JWT_EXPIRED' })
  const expiredString = await idp.signJwt({ sub: 'alice' }, { expiresIn: '-1h' })
  await t.rejects(jose.jwtVerify(expiredString, keySet), { code: 'ERR_JWT_EXPIRED' })

  const noExp = await idp.signJwt({ sub: 'alice', exp: undefined })
  t.equal(jose.decodeJwt(noExp).exp, undefined, 'a claim given as undefined is left out')

  const unknownKid = await idp.signJwt({ sub: 'alice' }, { kid: 'nope' })
  await t.rejects(jose.jwtVerify(unknownKid, keySet), { code: 'ERR_JWKS_NO_MATCHING_KEY' })

  const none = await idp.signJwt({ sub: 'alice' }, { alg: 'none' })
  t.equal(jose.decodeProtectedHeader(none).alg, 'none')
  await t.rejects(jose.jwtVerify(none, keySet))

  const hmac = await idp.signJwt({ sub: 'alice' }, { alg: 'HS256' })
  t.equal(jose.decodeProtectedHeader(hmac).alg, 'HS256')
  await t.rejects(jose.jwtVerify(hmac, keySet), 'HMAC keyed with the public key is refused by a JWKS verifier')

  await t.rejects(idp.signJwt({}, { alg: 'ES256' }), TypeError)
})

t.test('with idTokenSigningAlg ES256, signJwt signs ES256 with the served P-256 key', async (t) => {
  const { idp } = await setup(t, { idTokenSigningAlg: 'ES256' })
  const keySet = jose.createRemoteJWKSet(new URL(`${idp.issuer}/jwks`))
  const token = await idp.signJwt({ sub: 'alice' }, { alg: 'ES256' })
  const { protectedHeader } = await jose.jwtVerify(token, keySet, { issuer: idp.issuer })
  t.same([protectedHeader.alg, protectedHeader.kid], ['ES256', `${idp.jwks.keys[0]?.kid}-ec`])
})

t.test('authorization code + PKCE round trip, refresh, revocation', async (t) => {
  const env = await setup(t)
  const { tokens, browser, callbackUrl } = await signIn(env, 'alice')

  const callback = new URL(callbackUrl)
  t.equal(callback.searchParams.get('iss'), env.idp.issuer, 'RFC 9207 iss on the callback')
  t.ok(tokens.access_token, 'access token')
  t.ok(tokens.refresh_token, 'refresh token issued (offline_access + prompt=consent)')
  t.ok(tokens.id_token, 'ID token')
  t.equal(tokens.expires_in, 3600)

  const claims = tokens.claims()
  t.equal(claims?.sub, 'alice')
  t.equal(claims?.email, 'alice@example.com', 'email in the ID token')
  t.equal(claims?.email_verified, true)
  t.same(claims?.groups, ['admins', 'staff'], 'groups in the ID token')
  t.equal(claims?.preferred_username, 'alice')
  t.equal(claims?.name, 'Alice')
  t.ok(claims?.sid, 'sid present (back-channel logout enabled)')

  const visited = browser.history.map((u) => new URL(u).pathname)
  t.ok(
    visited.some((p) => p.startsWith('/interaction/')),
    'went through the interaction pages',
  )

  // The same browser, still signed in at the provider, comes straight back without forms.
  const again = await signIn(env, 'alice', { prompt: 'consent' }, browser)
  t.ok(again.tokens.access_token, 'second sign-in with an existing provider session works')

  const refreshed = await oidc.refreshTokenGrant(env.config, tokens.refresh_token ?? '')
  t.ok(refreshed.access_token, 'refresh gives a new access token')
  t.not(refreshed.access_token, tokens.access_token)
  t.same(refreshed.claims()?.groups, ['admins', 'staff'], 'refreshed ID token still carries groups')
  const currentRefresh = refreshed.refresh_token ?? tokens.refresh_token ?? ''

  await oidc.tokenRevocation(env.config, currentRefresh, { token_type_hint: 'refresh_token' })
  const error = await oidc.refreshTokenGrant(env.config, currentRefresh).then(
    () => undefined,
    (err: unknown) => err,
  )
  t.ok(error instanceof oidc.ResponseBodyError, 'refresh after revocation fails')
  t.equal((error as oidc.ResponseBodyError).error, 'invalid_grant')
})

t.test('accounts: bob and strangers', async (t) => {
  const env = await setup(t)
  const bob = await signIn(env, 'bob')
  t.same(bob.tokens.claims()?.groups, ['staff'])
  const carol = await signIn(env, 'carol')
  t.same(carol.tokens.claims()?.groups, [])
  t.equal(carol.tokens.claims()?.email, 'carol@example.com')
})

t.test('PKCE is required and refresh tokens need prompt=consent', async (t) => {
  const env = await setup(t)
  const browser = new Browser()
  const url = new URL(`${env.idp.issuer}/auth`)
  url.search = new URLSearchParams({
    client_id: CLIENT_ID,
    response_type: 'code',
    scope: 'openid',
    redirect_uri: `${env.rp.origin}/cb`,
    state: 'abc',
  }).toString()
  const res = await browser.fetch(url, { navigate: true })
  t.equal(res.status, 303)
  const location = new URL(res.headers.get('location') ?? '')
  t.equal(location.origin + location.pathname, `${env.rp.origin}/cb`)
  t.equal(location.searchParams.get('error'), 'invalid_request')
  t.match(location.searchParams.get('error_description'), /PKCE/)

  const noConsent = await signIn(env, 'alice', { prompt: 'login' })
  t.equal(noConsent.tokens.refresh_token, undefined, 'offline_access silently dropped without prompt=consent')
})

t.test("refreshTokenPolicy 'always' issues refresh tokens without consent; rotation can be forced", async (t) => {
  const env = await setup(t, { refreshTokenPolicy: 'always', rotateRefreshTokens: true, accessTokenTtlSeconds: 120 })
  const { tokens } = await signIn(env, 'alice', {})
  t.ok(tokens.refresh_token, 'refresh token without prompt=consent')
  t.equal(tokens.expires_in, 120, 'access token ttl from the options')
  const refreshed = await oidc.refreshTokenGrant(env.config, tokens.refresh_token ?? '')
  t.ok(refreshed.refresh_token, 'rotated')
  t.not(refreshed.refresh_token, tokens.refresh_token)
  const error: unknown = await oidc.refreshTokenGrant(env.config, tokens.refresh_token ?? '').catch((err: unknown) => err)
  t.equal((error as oidc.ResponseBodyError).error, 'invalid_grant', 'the old one is dead')
})

t.test('RP-initiated logout with back-channel logout token', async (t) => {
  const env = await setup(t)
  const { tokens, browser } = await signIn(env, 'alice')
  const endSession = oidc.buildEndSessionUrl(env.config, {
    id_token_hint: tokens.id_token ?? '',
    post_logout_redirect_uri: `${env.rp.origin}/`,
  })
  const { response, visited } = await browser.confirmProviderLogout(endSession)
  t.equal(response.status, 200)
  t.equal(visited.at(-1), `${env.rp.origin}/`, 'back at the post-logout redirect URI')
  t.equal(await response.text(), 'relying party home')

  t.equal(env.rp.logoutTokens.length, 1, 'the provider sent a logout token to the loopback RP')
  const logoutToken = jose.decodeJwt(env.rp.logoutTokens[0] ?? '')
  t.equal(logoutToken.sub, 'alice')
  t.equal(logoutToken.sid, tokens.claims()?.sid)
  t.ok(logoutToken.events, 'events claim')

  // A new sign-in needs the login form again.
  browser.history.length = 0
  await signIn(env, 'alice', { prompt: 'consent' }, browser)
  t.ok(
    browser.history.some((u) => u.includes('/interaction/')),
    'provider session ended',
  )
})
