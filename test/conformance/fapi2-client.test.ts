// FAPI2-Security-Profile-Final: Relying Party (client) test
// (fapi2-security-profile-final-client-test-plan, variant plain_fapi, OpenID Connect client,
// private_key_jwt, DPoP, unsigned PAR, plain_response), one test per module in the plan's order
// (FAPI2SPFinalClientTestPlan of openid-certification/conformance-suite; the JARM modules are
// not in this plan). The FAPI 2.0 modules have no old rp-* name. docs/conformance.md lists them.
//
// What they ask: FAPI 2.0 Security Profile 5.3.2 (the client), RFC 9207 (iss in the
// authorization response), RFC 9126 (PAR), RFC 9449 (DPoP), OpenID Connect Core 3.1.3.7 (ID
// token validation) and Discovery 4.3 (the issuer of the configuration). The gateway's FAPI 2.0
// profile is docs/features/dpop-par-fapi.md; test/e2e/fapi2.test.ts holds its wider tests.

import t from 'tap'
import { startAdversarialStack, SUBJECT, type AdversarialProvider, type Behaviour } from '../fixtures/adversarial-provider.ts'
import { problems } from '../fixtures/config/base.ts'
import { CLIENT_ID, discoveryFailure, type Stack } from '../fixtures/stack.ts'
import { fapi2Client, startFapi2Stack } from '../fixtures/fapi2.ts'
import { assertRefused, assertSignedIn, proxiedIdentity, signIn, type Verdict } from './runner.ts'

type Test = Parameters<Parameters<typeof t.test>[0]>[0]

const client = fapi2Client()
const FAPI2 = client.provider
const now = (): number => Math.floor(Date.now() / 1000)

/** oidc-provider as a FAPI 2.0 provider (PAR required, DPoP-bound tokens, private_key_jwt, iss). */
function realFapiStack(t: Test, dpopNonces: boolean): Promise<Stack> {
  return startFapi2Stack(t, client, { dpopNonces })
}

/** The happy path against the real provider: pushed, bound, signed in. */
async function assertFapiSignIn(t: Test, real: Stack): Promise<void> {
  const verdict = await signIn(real)
  t.strictSame(
    [...(verdict.authorizationRequest?.searchParams.keys() ?? [])].sort(),
    ['client_id', 'request_uri'],
    'the authorization request was pushed (PAR)',
  )
  const accessToken = (JSON.parse(verdict.body) as { value: string }).value
  await assertSignedIn(t, real, verdict, 'alice')
  const metadata = (await (await fetch(`${real.provider?.issuer}/.well-known/openid-configuration`)).json()) as { userinfo_endpoint: string }
  const asBearer = await fetch(metadata.userinfo_endpoint, { headers: { authorization: `Bearer ${accessToken}` } })
  t.equal(asBearer.status, 401, 'the access token is DPoP-bound: useless as a Bearer token')
}

/** One adversarial FAPI 2.0 provider (ES256 ID tokens) for the modules that differ by behaviour only. */
const { stack, provider } = await startAdversarialStack(t, { provider: { fapi2: true, signingAlg: 'ES256' }, config: { provider: FAPI2 } })
t.beforeEach(() => provider.reset())

async function run(adversary: AdversarialProvider, at: Stack, behaviour: Partial<Behaviour>): Promise<{ verdict: Verdict; tokenRequests: number }> {
  adversary.set(behaviour)
  const before = adversary.tokenRequests
  const verdict = await signIn(at)
  return { verdict, tokenRequests: adversary.tokenRequests - before }
}

/** The ID token refused once the code was redeemed: 403 id_token_invalid, no session. */
async function assertIdTokenRefused(t: Test, behaviour: Partial<Behaviour>): Promise<void> {
  const { verdict, tokenRequests } = await run(provider, stack, behaviour)
  t.equal(tokenRequests, 1, 'the code was redeemed, then its ID token judged')
  assertRefused(t, verdict, 403, 'id_token_invalid')
  t.ok(verdict.transactionCleared, 'the sign-in transaction is ended')
}

/** The authorization response refused before the code is redeemed. */
async function assertResponseRefused(t: Test, behaviour: Partial<Behaviour>, status: number, code: string): Promise<void> {
  const { verdict, tokenRequests } = await run(provider, stack, behaviour)
  t.equal(tokenRequests, 0, 'the code is never sent to the token endpoint')
  assertRefused(t, verdict, status, code)
}

t.test('fapi2-security-profile-final-client-test-happy-path (no rp-* name)', async (t) => {
  await assertFapiSignIn(t, await realFapiStack(t, true))
})

t.test('fapi2-security-profile-final-client-test-discovery-issuer-mismatch (no rp-* name)', async (t) => {
  const lines: string[] = []
  const { stack: at, provider: adversary } = await startAdversarialStack(t, {
    provider: { fapi2: true, signingAlg: 'ES256', metadataIssuer: 'https://issuer.example/INVALID' },
    config: { provider: FAPI2, log: { level: 'warn' } },
    logStream: { write: (line) => void lines.push(line) },
    waitForProvider: false,
  })
  t.match(await discoveryFailure(lines), { call: 'discovery', check: 'issuer' }, 'the log names the issuer check')
  const verdict = await signIn(at)
  assertRefused(t, verdict, 503, 'provider_misconfigured')
  t.equal(adversary.authorizationRequests, 0, 'the flow stops at the configuration')
})

t.test('fapi2-security-profile-final-client-test-invalid-iss (no rp-* name)', async (t) => {
  await assertIdTokenRefused(t, { idTokenClaims: { iss: `${provider.issuer}/invalid` } })
})

t.test('fapi2-security-profile-final-client-test-invalid-aud (no rp-* name)', async (t) => {
  await assertIdTokenRefused(t, { idTokenClaims: { aud: `${CLIENT_ID}invalid` } })
})

t.test('fapi2-security-profile-final-client-test-invalid-secondary-aud (no rp-* name)', async (t) => {
  // Core 3.1.3.7 steps 3 and 4: an audience the client does not trust, and no azp.
  await assertIdTokenRefused(t, { idTokenClaims: { aud: [CLIENT_ID, 'some-other-client'] } })
})

t.test('fapi2-security-profile-final-client-test-invalid-null-alg (no rp-* name)', async (t) => {
  await assertIdTokenRefused(t, { idToken: 'alg-none' })
})

t.test('fapi2-security-profile-final-client-test-invalid-alternate-alg (no rp-* name)', async (t) => {
  // RS256 with an RSA key the provider does publish: only the algorithm is wrong (FAPI 2.0 5.4:
  // PS256, ES256 or EdDSA).
  await assertIdTokenRefused(t, { publishSecondKey: true, idToken: 'unknown-key' })
})

t.test('fapi2-security-profile-final-client-test-invalid-expired-exp (no rp-* name)', async (t) => {
  await assertIdTokenRefused(t, { idTokenClaims: { iat: now() - 900, exp: now() - 360 } })
})

t.test('fapi2-security-profile-final-client-test-invalid-missing-exp (no rp-* name)', async (t) => {
  await assertIdTokenRefused(t, { idTokenClaims: { exp: undefined } })
})

t.test('fapi2-security-profile-final-client-test-invalid-missing-aud (no rp-* name)', async (t) => {
  await assertIdTokenRefused(t, { idTokenClaims: { aud: undefined } })
})

t.test('fapi2-security-profile-final-client-test-invalid-missing-iss (no rp-* name)', async (t) => {
  await assertIdTokenRefused(t, { idTokenClaims: { iss: undefined } })
})

t.test('fapi2-security-profile-final-client-test-valid-aud-as-array (no rp-* name)', async (t) => {
  const { verdict } = await run(provider, stack, { idTokenClaims: { aud: [CLIENT_ID] } })
  await assertSignedIn(t, stack, verdict, SUBJECT)
})

t.test('fapi2-security-profile-final-client-test-invalid-nonce (no rp-* name)', async (t) => {
  await assertIdTokenRefused(t, { idTokenClaims: { nonce: 'a-nonce-of-another-request' } })
})

t.test('fapi2-security-profile-final-client-test-invalid-missing-nonce (no rp-* name)', async (t) => {
  await assertIdTokenRefused(t, { idTokenClaims: { nonce: undefined } })
})

t.test('fapi2-security-profile-final-client-test-invalid-authorization-response-iss (no rp-* name)', async (t) => {
  await assertResponseRefused(t, { authorizationIss: 'https://issuer.example/invalid' }, 403, 'authorization_response_invalid')
})

t.test('fapi2-security-profile-final-client-test-remove-authorization-response-iss (no rp-* name)', async (t) => {
  await assertResponseRefused(t, { authorizationIss: null }, 403, 'authorization_response_invalid')
})

t.test('fapi2-security-profile-final-client-test-ensure-authorization-response-with-invalid-state-fails (no rp-* name)', async (t) => {
  await assertResponseRefused(t, { authorizationState: 'a-state-of-another-request' }, 403, 'state_mismatch')
})

t.test('fapi2-security-profile-final-client-test-ensure-authorization-response-with-invalid-missing-state-fails (no rp-* name)', async (t) => {
  await assertResponseRefused(t, { authorizationState: null }, 403, 'state_mismatch')
})

t.test('fapi2-security-profile-final-client-test-token-endpoint-response-without-expires_in (no rp-* name)', async (t) => {
  // RFC 6749 5.1: expires_in is RECOMMENDED, not required.
  const { verdict } = await run(provider, stack, { expiresIn: undefined })
  t.notOk(provider.lastAccessToken === undefined, 'a token response was given')
  await assertSignedIn(t, stack, verdict, SUBJECT)
})

t.test('fapi2-security-profile-final-client-test-token-type-case-insensitivity (no rp-* name)', async (t) => {
  // RFC 6749 5.1: token_type is case-insensitive; `dPoP` is still DPoP-bound.
  const { verdict } = await run(provider, stack, { tokenTypeCase: 'inverted' })
  await assertSignedIn(t, stack, verdict, SUBJECT)
})

t.test('fapi2-security-profile-final-client-test-rs-dpop-auth-scheme-case-insensitivity (no rp-* name)', async (t) => {
  // The module's resource server answers a DPoP-Nonce challenge with an odd-cased scheme. The
  // gateway calls no resource server with its DPoP-bound token: upstreams get identity headers,
  // never the token (docs/features/dpop-par-fapi.md), so there is no challenge to read.
  const { verdict } = await run(provider, stack, {})
  await assertSignedIn(t, stack, verdict, SUBJECT)
  const { headers } = await proxiedIdentity(stack, verdict.browser)
  t.equal(headers.authorization, undefined, 'no access token to the upstream')
  t.equal(headers.dpop, undefined, 'no DPoP proof to the upstream')
  t.match(
    problems({ provider: FAPI2, upstreams: [{ name: 'app', target: 'http://127.0.0.1:1', forwardAccessToken: true }] }),
    [/forwardAccessToken: cannot be true with provider\.dpop/],
    'forwarding the bound token is refused by the configuration',
  )
})

t.test('fapi2-security-profile-final-client-test-happy-path-no-dpop-nonce (no rp-* name)', async (t) => {
  await assertFapiSignIn(t, await realFapiStack(t, false))
})
