// Step-up per path rule (docs/features/step-up.md), end to end against the real oidc-provider with
// its ACR support (the dev provider's acrValues: a plain login grants `pwd`, the login form's
// second-factor box `mfa`, and acr_values the session does not meet asks for the login again).

import { generateKeyPairSync } from 'node:crypto'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import * as jose from 'jose'
import t, { type Test } from 'tap'
import { manualClock } from '../fixtures/clock.ts'
import { checkRequestFor, HEADERS_TO_EXT_AUTHZ, sendCheck } from '../fixtures/envoy.ts'
import { checkRequest, serveGatewayGrpc } from '../fixtures/ext-authz-grpc.ts'
import { rawRequest } from '../fixtures/http.ts'
import { startRedis } from '../fixtures/redis.ts'
import type { Browser } from '../fixtures/browser.ts'
import { CLIENT_ID, startStack, type Stack, type StackOptions } from '../fixtures/stack.ts'

const JSON_ACCEPT = { accept: 'application/json' }
const MFA = { loginFields: { mfa: '1' } }
const CHALLENGE = 'Bearer error="insufficient_user_authentication", error_description="A different authentication level is required"'
// RFC 9470 3's parameters, then RFC 9728 5.1's resource_metadata (on by default for an upstream on /).
const RESOURCE_METADATA = ', resource_metadata="http://127\\.0\\.0\\.1:\\d+/\\.well-known/oauth-protected-resource"'
const escaped = (text: string): string => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
const CHALLENGE_ACR = new RegExp(`^${escaped(`${CHALLENGE}, acr_values="mfa"`)}${RESOURCE_METADATA}$`)
const CHALLENGE_MAX_AGE = new RegExp(`^${escaped(`${CHALLENGE}, max_age="60"`)}${RESOURCE_METADATA}$`)

const dir = mkdtempSync(join(tmpdir(), 'ogw-stepup-'))
const signingKey = join(dir, 'assert.pem')
writeFileSync(signingKey, generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ format: 'pem', type: 'pkcs8' }))

interface Echo {
  headers: Record<string, string | undefined>
}

function stepUpStack(t: Test, extra: Partial<StackOptions> = {}): Promise<Stack> {
  return startStack(t, {
    provider: { acrValues: ['pwd', 'mfa'], ...extra.provider },
    config: { session: { store: 'memory' }, assertions: { signingKeys: [signingKey] }, ...extra.config },
    upstreams: [
      {
        name: 'app',
        identityAssertion: true,
        rules: [
          { path: '/payroll', allow: { acr: ['mfa'] } },
          { path: '/recent', allow: { maxAuthAgeSeconds: 60 } },
        ],
      },
    ],
    ...(extra.clock === undefined ? {} : { clock: extra.clock }),
  })
}

/** The gateway's session cookie (the memory store's reference to its session id). */
function sessionCookie(stack: Stack, browser: Browser): string | undefined {
  return browser
    .cookieHeader(`${stack.gw}/x`)
    .split('; ')
    .find((pair) => pair.startsWith('ogw='))
}

async function echo(stack: Stack, browser: Browser, path: string): Promise<Echo> {
  const res = await browser.fetch(`${stack.gw}${path}`, { headers: JSON_ACCEPT })
  if (res.status !== 200) throw new Error(`${path}: ${res.status} ${await res.text()}`)
  return (await res.json()) as Echo
}

for (const store of ['memory', 'redis', 'cookie'] as const)
  t.test(`${store} store: a page load is sent through sign-in again with acr_values, and the session is upgraded in place`, async (t) => {
    const session = store === 'redis' ? { store, redisUrl: (await startRedis(t)).url } : { store }
    const stack = await stepUpStack(t, { config: { session, assertions: { signingKeys: [signingKey] } } })
    const browser = await stack.signedIn('alice')
    const before = sessionCookie(stack, browser)
    const plain = await echo(stack, browser, '/page')
    t.equal(plain.headers['x-forwarded-acr'], 'pwd', 'the sign-in acr is forwarded')
    t.equal(plain.headers['x-forwarded-amr'], 'pwd')

    // API and XHR: the RFC 9470 challenge.
    const api = await browser.fetch(`${stack.gw}/payroll/slip`, { headers: JSON_ACCEPT })
    t.equal(api.status, 401)
    t.match(api.headers.get('www-authenticate'), CHALLENGE_ACR)
    const problem = (await api.json()) as Record<string, unknown>
    t.equal(problem.code, 'insufficient_user_authentication')
    t.equal(problem.acr_values, 'mfa')
    t.equal(problem.signInUrl, `${stack.gw}/api/v1/openid/redirect?redirectAfter=%2Fpayroll%2Fslip`)

    // A page load: back through the redirect endpoint, which asks the provider for acr_values=mfa.
    const page = await browser.fetch(`${stack.gw}/payroll/slip`, { navigate: true })
    t.equal(page.status, 302)
    const signIn = new URL(page.headers.get('location') ?? '', stack.gw)
    t.equal(signIn.pathname, '/api/v1/openid/redirect')
    const authorize = await browser.fetch(signIn, { navigate: true })
    const authorization = new URL(authorize.headers.get('location') ?? '')
    t.equal(authorization.searchParams.get('acr_values'), 'mfa', 'acr_values in the authorization request')
    t.equal(authorization.searchParams.get('max_age'), null, 'no max_age for an acr rule')

    browser.prompts.length = 0
    const callback = await browser.signIn(authorization, 'alice', { ...MFA, gatewayOrigin: stack.gw })
    t.ok(browser.prompts.includes('login'), 'the provider asked for the login again (its session had acr pwd)')
    t.equal(callback.status, 302)
    t.equal(callback.headers.get('location'), '/payroll/slip')
    // The memory and Redis stores' cookie references the session (its id, its store key): unchanged.
    // The cookie store seals the whole session (its id inside) in the cookie, which changes with the tokens.
    if (store !== 'cookie') t.equal(sessionCookie(stack, browser), before, 'the same gateway session: its cookie (and id) unchanged')

    const upgraded = await echo(stack, browser, '/payroll/slip')
    t.equal(upgraded.headers['x-forwarded-user'], 'alice')
    t.equal(upgraded.headers['x-forwarded-acr'], 'mfa', 'the stronger acr recorded')
    t.equal(upgraded.headers['x-forwarded-amr'], 'pwd,otp')
    const jwks = jose.createRemoteJWKSet(new URL(`${stack.gw}/.well-known/jwks.json`))
    const { payload } = await jose.jwtVerify(upgraded.headers['x-identity-assertion'] ?? '', jwks, { issuer: stack.gw, audience: 'app' })
    t.equal(payload.acr, 'mfa', 'the assertion carries acr')
    t.strictSame(payload.amr, ['pwd', 'otp'], 'and amr')
    t.equal((await browser.fetch(`${stack.gw}/payroll/slip`, { navigate: true })).status, 200, 'the page load passes now: no loop')
  })

t.test('a step-up sign-in as another user replaces the session: two users are never merged', async (t) => {
  const stack = await stepUpStack(t)
  const browser = await stack.signedIn('alice')
  const aliceCookie = sessionCookie(stack, browser) ?? ''
  const page = await browser.fetch(`${stack.gw}/payroll`, { navigate: true })
  const callback = await browser.signIn(new URL(page.headers.get('location') ?? '', stack.gw), 'bob', MFA)
  t.equal(callback.status, 302)
  const bobCookie = sessionCookie(stack, browser)
  t.not(bobCookie, aliceCookie, 'a new session (a new id, a new cookie)')
  const bob = await echo(stack, browser, '/payroll')
  t.equal(bob.headers['x-forwarded-user'], 'bob')
  t.equal(bob.headers['x-forwarded-email'], 'bob@example.com', "nothing of alice's session kept")
  const replayed = await rawRequest(stack.gw, '/page', { headers: { ...JSON_ACCEPT, cookie: aliceCookie } })
  t.equal(replayed.status, 401, "alice's former session is gone, not upgraded to bob")
})

t.test('a user who does not give the second factor is refused at the callback, not sent round again', async (t) => {
  const stack = await stepUpStack(t)
  const browser = await stack.signedIn('alice')
  const page = await browser.fetch(`${stack.gw}/payroll`, { navigate: true })
  const callback = await browser.signIn(new URL(page.headers.get('location') ?? '', stack.gw), 'alice')
  t.equal(callback.status, 403)
  t.match(await callback.text(), /step_up_failed/)
  t.equal((await browser.fetch(`${stack.gw}/page`, { headers: JSON_ACCEPT })).status, 200, 'the session it had is kept')
})

t.test('a provider that ignores acr_values does not grant access, and does not loop the browser', async (t) => {
  const stack = await stepUpStack(t, { provider: { acrValues: ['pwd', 'mfa'], ignoreAcrValues: true } })
  const browser = await stack.signedIn('alice')
  const page = await browser.fetch(`${stack.gw}/payroll`, { navigate: true })
  browser.prompts.length = 0
  const callback = await browser.signIn(new URL(page.headers.get('location') ?? '', stack.gw), 'alice', MFA)
  t.notOk(browser.prompts.includes('login'), 'the provider did not ask for the login again')
  t.equal(callback.status, 403, 'refused at the callback: 403 step_up_failed')
  t.match(await callback.text(), /step_up_failed/)
  const api = await browser.fetch(`${stack.gw}/payroll`, { headers: JSON_ACCEPT })
  t.equal(api.status, 401, 'still refused with the challenge')
  t.match(api.headers.get('www-authenticate'), CHALLENGE_ACR)
})

t.test('max_age: a session without a recent auth_time steps up; the callback checks auth_time', async (t) => {
  const clock = manualClock()
  const stack = await stepUpStack(t, { clock })
  const browser = await stack.signedIn('alice')
  const api = await browser.fetch(`${stack.gw}/recent`, { headers: JSON_ACCEPT })
  t.equal(api.status, 401, 'no auth_time in the session: not known to be recent')
  t.match(api.headers.get('www-authenticate'), CHALLENGE_MAX_AGE)
  t.equal(((await api.json()) as Record<string, unknown>).max_age, 60)

  const page = await browser.fetch(`${stack.gw}/recent`, { navigate: true })
  const authorize = await browser.fetch(new URL(page.headers.get('location') ?? '', stack.gw), { navigate: true })
  const authorization = new URL(authorize.headers.get('location') ?? '')
  t.equal(authorization.searchParams.get('max_age'), '60')
  t.equal(authorization.searchParams.get('acr_values'), null)
  const callback = await browser.signIn(authorization, 'alice', { gatewayOrigin: stack.gw })
  t.equal(callback.status, 302)
  const recent = await echo(stack, browser, '/recent')
  t.match(recent.headers['x-forwarded-auth-time'] ?? '', /^\d+$/, 'auth_time recorded and forwarded')
  const jwks = jose.createRemoteJWKSet(new URL(`${stack.gw}/.well-known/jwks.json`))
  const { payload } = await jose.jwtVerify(recent.headers['x-identity-assertion'] ?? '', jwks, { issuer: stack.gw, audience: 'app' })
  t.equal(payload.auth_time, Number(recent.headers['x-forwarded-auth-time']), 'the assertion carries auth_time')

  // Past 60 s + the 30 s tolerance on the gateway's clock (which started with the stack): too old again.
  clock.advance(120_000)
  const old = await browser.fetch(`${stack.gw}/recent`, { headers: JSON_ACCEPT })
  t.equal(old.status, 401)
  // The provider (on the real clock) thinks its login recent and does not ask again: its
  // auth_time is older than max_age by the gateway's clock, which the callback refuses.
  const again = await browser.fetch(`${stack.gw}/recent`, { navigate: true })
  const refused = await browser.signIn(new URL(again.headers.get('location') ?? '', stack.gw), 'alice')
  t.equal(refused.status, 403)
  t.match(await refused.text(), /step_up_failed/)
})

t.test("Bearer tokens: the token's own acr decides, and a page load gets the challenge, never a sign-in", async (t) => {
  const stack = await stepUpStack(t)
  const provider = stack.provider!
  const weak = await provider.signJwt({ sub: 'service-a', aud: CLIENT_ID, scope: 'api', acr: 'pwd', auth_time: Math.floor(Date.now() / 1000) })
  const strong = await provider.signJwt({ sub: 'service-a', aud: CLIENT_ID, scope: 'api', acr: 'mfa', amr: ['hwk'] })
  const navigation = { accept: 'text/html', 'sec-fetch-mode': 'navigate' }
  for (const headers of [JSON_ACCEPT, navigation]) {
    const res = await rawRequest(stack.gw, '/payroll', { headers: { ...headers, authorization: `Bearer ${weak}` } })
    t.equal(res.status, 401, `${headers.accept}: 401`)
    t.match(res.headers['www-authenticate'], CHALLENGE_ACR)
  }
  const ok = await rawRequest(stack.gw, '/payroll', { headers: { ...JSON_ACCEPT, authorization: `Bearer ${strong}` } })
  t.equal(ok.status, 200)
  t.equal(ok.json<Echo>().headers['x-forwarded-acr'], 'mfa')
  t.equal(ok.json<Echo>().headers['x-forwarded-amr'], 'hwk')
  const none = await rawRequest(stack.gw, '/payroll', {
    headers: { ...JSON_ACCEPT, authorization: `Bearer ${await provider.signJwt({ sub: 's', aud: CLIENT_ID, scope: 'api' })}` },
  })
  t.equal(none.status, 401, 'a token without acr')
  t.equal(
    (await rawRequest(stack.gw, '/recent', { headers: { ...JSON_ACCEPT, authorization: `Bearer ${weak}` } })).status,
    200,
    'a recent auth_time in the token',
  )
})

t.test('the check endpoints render the step-up verdict: a page load signs in, a program gets the challenge', async (t) => {
  const host = '127.0.0.1'
  const stack = await stepUpStack(t, {
    config: {
      session: { store: 'memory' },
      assertions: { signingKeys: [signingKey] },
      forwardAuth: { cache: { enabled: true, ttlSeconds: 60 } },
      envoy: { pathPrefix: '/api/v1/openid/ext-authz' },
    },
  })
  const grpc = await serveGatewayGrpc(t, stack)
  const browser = await stack.signedIn('alice')
  const cookie = sessionCookie(stack, browser) ?? ''
  const navigation = { accept: 'text/html', 'sec-fetch-mode': 'navigate' }
  const signInUrl = `${stack.gw}/api/v1/openid/redirect?redirectAfter=`

  // ingress-nginx: 401 with the challenge (it sends page loads to its auth-signin itself).
  const nginx = await rawRequest(stack.gw, '/api/v1/openid/auth', {
    headers: { ...JSON_ACCEPT, cookie, 'x-original-method': 'GET', 'x-original-url': `${stack.gw}/payroll/x` },
  })
  t.equal(nginx.status, 401)
  t.match(nginx.headers['www-authenticate'], CHALLENGE_ACR)
  t.equal(nginx.json().code, 'insufficient_user_authentication')
  // Traefik: a page load is sent to sign in; an API call gets the challenge.
  const traefikHeaders = {
    cookie,
    'x-forwarded-method': 'GET',
    'x-forwarded-host': new URL(stack.gw).host,
    'x-forwarded-uri': '/payroll/x',
    'x-forwarded-proto': 'http',
  }
  const traefikPage = await rawRequest(stack.gw, '/api/v1/openid/auth', { headers: { ...traefikHeaders, ...navigation } })
  t.equal(traefikPage.status, 302)
  t.match(traefikPage.headers.location, signInUrl)
  const traefikApi = await rawRequest(stack.gw, '/api/v1/openid/auth', { headers: { ...traefikHeaders, ...JSON_ACCEPT } })
  t.equal(traefikApi.status, 401)
  t.match(traefikApi.headers['www-authenticate'], CHALLENGE_ACR)
  // Envoy over HTTP.
  const envoyHost = new URL(stack.gw).host
  const envoyPage = await sendCheck(stack.gw, checkRequestFor({ method: 'GET', path: '/payroll/x', headers: { host: envoyHost, cookie, ...navigation } }))
  t.equal(envoyPage.status, 302)
  t.match(envoyPage.headers.location, signInUrl)
  const envoyApi = await sendCheck(stack.gw, checkRequestFor({ method: 'GET', path: '/payroll/x', headers: { host: envoyHost, cookie, ...JSON_ACCEPT } }))
  t.equal(envoyApi.status, 401)
  t.match(envoyApi.headers['www-authenticate'], CHALLENGE_ACR)
  const weak = await stack.provider!.signJwt({ sub: 'service-a', aud: CLIENT_ID, scope: 'api', acr: 'pwd' })
  const envoyBearer = await sendCheck(
    stack.gw,
    checkRequestFor({ method: 'GET', path: '/payroll/x', headers: { host: envoyHost, authorization: `Bearer ${weak}`, ...navigation } }, [
      ...HEADERS_TO_EXT_AUTHZ,
      'authorization',
    ]),
  )
  t.equal(envoyBearer.status, 401, 'a Bearer token on a page load: the challenge, not a sign-in')
  // Envoy over gRPC.
  const grpcPage = await grpc.check(checkRequest({ method: 'GET', host: envoyHost, path: '/payroll/x', scheme: 'http', headers: { cookie, ...navigation } }))
  t.equal(grpcPage.denied_response?.status?.code, 302)
  const grpcApi = await grpc.check(checkRequest({ method: 'GET', host: envoyHost, path: '/payroll/x', scheme: 'http', headers: { cookie, ...JSON_ACCEPT } }))
  t.equal(grpcApi.denied_response?.status?.code, 401)
  t.match(grpcApi.denied_response?.headers.find((h) => h.header.key === 'www-authenticate')?.header.value, CHALLENGE_ACR)
  // Outside the rule every dialect allows.
  const allowed = await rawRequest(stack.gw, '/api/v1/openid/auth', {
    headers: { ...JSON_ACCEPT, cookie, 'x-original-method': 'GET', 'x-original-url': `http://${host}/page` },
  })
  t.equal(allowed.status, 200)
  t.equal(allowed.headers['x-auth-request-acr'], 'pwd', 'forward-auth carries acr')

  // Stepped up in place (the same cookie), the next check with the same credentials passes: a
  // step-up verdict is never kept by the decision cache.
  const page = await browser.fetch(`${stack.gw}/payroll/x`, { navigate: true })
  t.equal((await browser.signIn(new URL(page.headers.get('location') ?? '', stack.gw), 'alice', MFA)).status, 302)
  t.equal(sessionCookie(stack, browser), cookie, 'the same session cookie')
  const after = await rawRequest(stack.gw, '/api/v1/openid/auth', {
    headers: { ...JSON_ACCEPT, cookie, 'x-original-method': 'GET', 'x-original-url': `${stack.gw}/payroll/x` },
  })
  t.equal(after.status, 200, 'decided afresh')
  t.equal(after.headers['x-auth-request-acr'], 'mfa')
})
