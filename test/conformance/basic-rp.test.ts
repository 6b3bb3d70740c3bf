// OpenID Connect Core: Basic Certification Profile Relying Party Tests
// (oidcc-client-basic-certification-test-plan, variant response_type code, response_mode
// default, client_secret_basic), one test per module in the plan's order (OIDCClientBasicTestPlan
// of openid-certification/conformance-suite). Each test is named `<module> (<old rp-* name>)`
// and docs/conformance.md lists it; test/docs/conformance-table.test.ts keeps the two equal.
//
// What each module asks is in OpenID Connect Core 1.0 3.1.3.7 (ID token validation), 3.1.3.5
// (the token response), 5.3.2 (the userinfo response), 5.4 (claims by scope), 9 (client
// authentication) and 10.1 (signing keys); the provider plays the module's misbehaviour.

import type { IncomingMessage } from 'node:http'
import * as jose from 'jose'
import t from 'tap'
import { startAdversarialStack, SUBJECT, type AdversarialProvider, type Behaviour } from '../fixtures/adversarial-provider.js'
import { devAccountClaims } from '../fixtures/provider.js'
import { CLIENT_ID, CLIENT_SECRET, startStack, type Stack } from '../fixtures/stack.js'
import { assertRefused, assertSignedIn, proxiedIdentity, signIn } from './runner.js'

type Test = Parameters<Parameters<typeof t.test>[0]>[0]

/** The ID token the session of `browser` holds, as the logout endpoint hands it to the provider. */
async function sessionIdToken(stack: Stack, browser: Awaited<ReturnType<typeof signIn>>['browser']): Promise<string> {
  const logout = await browser.fetch(`${stack.gw}/api/v1/openid/logout`, { method: 'DELETE' })
  const endSession = ((await logout.json()) as { value: string }).value
  return new URL(endSession).searchParams.get('id_token_hint') ?? ''
}

/** One adversarial provider for the ID token modules; each test sets its misbehaviour. */
const { stack, provider } = await startAdversarialStack(t)
t.beforeEach(() => provider.reset())

/** The ID token is refused after the code was redeemed: 403 id_token_invalid, the transaction ended. */
async function assertIdTokenRefused(t: Test, adversary: AdversarialProvider, at: Stack, behaviour: Partial<Behaviour>): Promise<void> {
  adversary.set(behaviour)
  const before = adversary.tokenRequests
  const verdict = await signIn(at)
  t.equal(adversary.tokenRequests, before + 1, 'the code was redeemed, then its ID token judged')
  assertRefused(t, verdict, 403, 'id_token_invalid')
  t.ok(verdict.transactionCleared, 'the sign-in transaction is ended')
  t.equal(at.upstream.requests.length, 0, 'nothing reached the upstream')
}

t.test('oidcc-client-test (rp-response_type-code)', async (t) => {
  const real = await startStack(t)
  const verdict = await signIn(real)
  const request = verdict.authorizationRequest
  t.equal(request?.searchParams.get('response_type'), 'code', 'the authorization code flow')
  t.ok(request?.searchParams.get('scope')?.split(' ').includes('openid'), 'scope openid')
  t.ok(request?.searchParams.get('state'), 'a state')
  t.ok(request?.searchParams.get('nonce'), 'a nonce')
  t.equal(request?.searchParams.get('code_challenge_method'), 'S256', 'PKCE')
  t.equal(verdict.callback?.method, 'GET', 'the response comes back in the query')
  await assertSignedIn(t, real, verdict, 'alice')
})

t.test('oidcc-client-test-invalid-iss (rp-id_token-issuer-mismatch)', async (t) => {
  await assertIdTokenRefused(t, provider, stack, { idTokenClaims: { iss: `${provider.issuer}1` } })
})

t.test('oidcc-client-test-missing-sub (rp-id_token-sub)', async (t) => {
  await assertIdTokenRefused(t, provider, stack, { idTokenClaims: { sub: undefined } })
})

t.test('oidcc-client-test-invalid-aud (rp-id_token-aud)', async (t) => {
  await assertIdTokenRefused(t, provider, stack, { idTokenClaims: { aud: `${CLIENT_ID}1` } })
})

t.test('oidcc-client-test-missing-iat (rp-id_token-iat)', async (t) => {
  await assertIdTokenRefused(t, provider, stack, { idTokenClaims: { iat: undefined } })
})

t.test('oidcc-client-test-kid-absent-single-jwks (rp-id_token-kid-absent-single-jwks)', async (t) => {
  // One RSA signing key, one each of P-256, secp256k1 and Ed25519, no kid anywhere: the RS256
  // token without kid fits exactly one key, which is used.
  const { stack: at, provider: adversary } = await startAdversarialStack(t, { provider: { keysWithoutKid: 1 } })
  const jwks = (await (await fetch(`${adversary.issuer}/jwks`)).json()) as { keys: jose.JWK[] }
  t.notOk(jwks.keys.some((k) => k.use === 'sig' && k.kid !== undefined), 'no signing key has a kid')
  const verdict = await signIn(at)
  await assertSignedIn(t, at, verdict, SUBJECT)
})

t.test('oidcc-client-test-kid-absent-multiple-jwks (rp-id_token-kid-absent-multiple-jwks)', async (t) => {
  // Three RSA signing keys without kid (and three of each other type): which one signed is not
  // said. The module accepts either trying each or refusing; the gateway refuses (docs/conformance.md).
  const { stack: at, provider: adversary } = await startAdversarialStack(t, { provider: { keysWithoutKid: 3 } })
  await assertIdTokenRefused(t, adversary, at, {})
})

t.test('oidcc-client-test-idtoken-sig-rs256 (rp-id_token-sig-rs256)', async (t) => {
  const real = await startStack(t, { provider: { idTokenSigningAlg: 'RS256' } })
  const verdict = await signIn(real)
  await assertSignedIn(t, real, verdict, 'alice')
  t.equal(jose.decodeProtectedHeader(await sessionIdToken(real, verdict.browser)).alg, 'RS256', 'the ID token was signed RS256')
})

t.test('oidcc-client-test-idtoken-sig-none (rp-id_token-sig-none)', async (t) => {
  // The provider advertises none next to RS256 and hands out an unsigned ID token from the token
  // endpoint. Core 3.1.3.7 would let a code-flow client accept it; the gateway never does.
  const { stack: at, provider: adversary } = await startAdversarialStack(t, { provider: { advertisedAlgs: ['RS256', 'none'] } })
  await assertIdTokenRefused(t, adversary, at, { idToken: 'alg-none' })
})

t.test('oidcc-client-test-invalid-sig-rs256 (rp-id_token-bad-sig-rs256)', async (t) => {
  await assertIdTokenRefused(t, provider, stack, { idToken: 'bad-signature' })
})

t.test('oidcc-client-test-userinfo-invalid-sub (rp-userinfo-bad-sub-claim)', async (t) => {
  // The userinfo endpoint answers with another sub than the ID token's. The gateway takes the
  // identity from the verified ID token only and never calls userinfo, so that sub cannot become
  // the user's identity (docs/conformance.md).
  const { stack: at, provider: adversary } = await startAdversarialStack(t, {
    provider: { userinfoEndpoint: true, behaviour: { userinfoClaims: { sub: `${SUBJECT}invalid`, email: 'intruder@example.com' } } },
  })
  const verdict = await signIn(at)
  const headers = await assertSignedIn(t, at, verdict, SUBJECT)
  t.equal(headers['x-forwarded-email'], 'adversary@example.com', "the ID token's email, not the userinfo answer's")
  t.equal(adversary.userinfoRequests, 0, 'the userinfo endpoint is never called')
})

t.test('oidcc-client-test-nonce-invalid (rp-nonce-invalid)', async (t) => {
  await assertIdTokenRefused(t, provider, stack, { idTokenClaims: { nonce: 'a-nonce-of-another-transaction' } })
})

t.test('oidcc-client-test-scope-userinfo-claims (rp-scope-userinfo-claims)', async (t) => {
  const real = await startStack(t)
  const verdict = await signIn(real, { username: 'bob' })
  const scopes = verdict.authorizationRequest?.searchParams.get('scope')?.split(' ') ?? []
  t.ok(scopes.includes('profile') && scopes.includes('email'), `claims asked for by scope: ${scopes.join(' ')}`)
  const headers = await assertSignedIn(t, real, verdict, 'bob')
  const claims = devAccountClaims('bob')
  t.equal(headers['x-forwarded-email'], claims.email, 'the email scope: email reaches the upstream')
  t.equal(headers['x-forwarded-preferred-username'], claims.preferred_username, 'the profile scope: preferred_username reaches the upstream')
})

t.test('oidcc-client-test-client-secret-basic (rp-token_endpoint-client_secret_basic)', async (t) => {
  const real = await startStack(t, { client: { tokenEndpointAuthMethod: 'client_secret_basic' }, config: { provider: { clientAuthMethod: 'client_secret_basic' } } })
  const seen: Array<string | undefined> = []
  real.provider?.provider.on('grant.success', (ctx: { req: IncomingMessage }) => seen.push(ctx.req.headers.authorization))
  const verdict = await signIn(real)
  await assertSignedIn(t, real, verdict, 'alice')
  t.equal(seen.length, 1, 'one grant at the token endpoint')
  // RFC 6749 2.3.1: client_id and secret form-urlencoded (openid-client also escapes `-`, which
  // decodes the same), joined by a colon, in Basic.
  const header = seen[0] ?? ''
  t.match(header, /^Basic [A-Za-z0-9+/]+=*$/, 'the provider received an Authorization: Basic header')
  const [id = '', secret = ''] = Buffer.from(header.slice(6), 'base64').toString('utf8').split(':')
  t.same([decodeURIComponent(id), decodeURIComponent(secret)], [CLIENT_ID, CLIENT_SECRET], 'carrying the client id and secret')
  const { status } = await proxiedIdentity(real, verdict.browser)
  t.equal(status, 200)
})
