// The modules of the OpenID Foundation's Basic RP plan (oidcc-client-basic-certification-test-plan,
// openid-certification/conformance-suite OIDCCClientBasicTestPlan), defined once, in the plan's
// order, each with one body. Two plans run them:
// - Basic RP (test/conformance/basic-rp.test.ts): response_mode default, the response in the
//   callback's query (OpenID Connect Core 1.0 3.1.2.5);
// - Form Post RP (test/conformance/form-post-rp.test.ts, oidcc-client-formpost-basic-certification-
//   test-plan): exactly these modules with response_mode=form_post (the suite's
//   AbstractFormPostTestPlan), the provider posting the response to POST /api/v1/openid/callback
//   (OAuth 2.0 Form Post Response Mode, section 2), which test/conformance/runner.ts submits
//   cross-site.
// Each runs as a tap test named `<module> (<old rp-* name>)`; docs/conformance.md lists them
// per plan and test/docs/conformance-table.test.ts reads the names from BASIC_RP_MODULES.
//
// What each module asks is in OpenID Connect Core 1.0 3.1.3.7 (ID token validation), 3.1.3.5
// (the token response), 5.3.2 (the userinfo response), 5.4 (claims by scope), 9 (client
// authentication) and 10.1 (signing keys); the provider plays the module's misbehaviour: the
// adversarial provider (test/fixtures/adversarial-provider.ts), or the real oidc-provider for the
// well-behaved modules.

import type { IncomingMessage } from 'node:http'
import * as jose from 'jose'
import type { Test } from 'tap'
import { startAdversarialStack, SUBJECT, type AdversarialProvider, type Behaviour, type ProviderOptions } from '../fixtures/adversarial-provider.ts'
import type { Browser } from '../fixtures/browser.ts'
import { devAccountClaims } from '../fixtures/provider.ts'
import { CLIENT_ID, CLIENT_SECRET, startStack, type Stack, type StackOptions } from '../fixtures/stack.ts'
import { assertRefused, assertSignedIn, proxiedIdentity, signIn, type ResponseMode, type SignInOptions, type Verdict } from './runner.ts'

/** What a module's body is given: the plan's response mode and the stack the modules share. */
interface Plan {
  mode: ResponseMode
  /** One adversarial provider for the modules that only change its behaviour; reset before each. */
  shared: { stack: Stack; provider: AdversarialProvider }
}

interface Module {
  /** The conformance-suite module (`@PublishTestModule` testName). */
  name: string
  /** Its name in the Foundation's former RP test tool. */
  old: string
  run(t: Test, plan: Plan): Promise<void>
}

/** The gateway configuration of the plan, merged with a module's own. */
function gatewayConfig(plan: Plan, provider: Record<string, unknown> = {}): Record<string, unknown> {
  return { provider: { ...provider, responseMode: plan.mode } }
}

/** A real oidc-provider stack for the plan's response mode. */
function realStack(t: Test, plan: Plan, options: Omit<StackOptions, 'config'> & { gatewayProvider?: Record<string, unknown> } = {}): Promise<Stack> {
  const { gatewayProvider, ...rest } = options
  return startStack(t, { ...rest, config: gatewayConfig(plan, gatewayProvider) })
}

/** An adversarial stack of the module's own (keys the gateway loads once, or endpoints it discovers). */
function adversarialStack(t: Test, plan: Plan, provider: ProviderOptions): Promise<{ stack: Stack; provider: AdversarialProvider }> {
  return startAdversarialStack(t, { provider, config: gatewayConfig(plan) })
}

/**
 * One sign-in, and what every module of both plans checks about the way the response came back:
 * the authorization request asks for the plan's response mode, and the code arrived in the
 * callback's query (query) or in the posted form and in no URL (form_post).
 */
async function signInPlan(t: Test, plan: Plan, stack: Stack, options: Omit<SignInOptions, 'responseMode'> = {}): Promise<Verdict> {
  const verdict = await signIn(stack, { ...options, responseMode: plan.mode })
  const request = verdict.authorizationRequest
  t.equal(request?.searchParams.get('response_mode'), plan.mode === 'form_post' ? 'form_post' : null, `response_mode for ${plan.mode}`)
  const callback = verdict.callback
  const inUrl = callback === undefined ? null : new URL(callback.url).searchParams.get('code')
  if (plan.mode === 'query') {
    t.equal(callback?.method, 'GET', 'the response comes back by redirect')
    t.ok(inUrl, 'the code is in the callback query')
  } else {
    t.equal(callback?.method, 'POST', 'the response is posted to the callback')
    t.ok(callback?.body?.get('code'), 'the code is in the posted form')
    t.equal(inUrl, null, 'the code is in no URL')
  }
  return verdict
}

/** The ID token is refused after the code was redeemed: 403 id_token_invalid, the transaction ended. */
async function assertIdTokenRefused(t: Test, plan: Plan, at: { stack: Stack; provider: AdversarialProvider }, behaviour: Partial<Behaviour>): Promise<void> {
  at.provider.set(behaviour)
  const before = at.provider.tokenRequests
  const upstreamBefore = at.stack.upstream.requests.length
  const verdict = await signInPlan(t, plan, at.stack)
  t.equal(at.provider.tokenRequests, before + 1, 'the code was redeemed, then its ID token judged')
  assertRefused(t, verdict, 403, 'id_token_invalid')
  t.ok(verdict.transactionCleared, 'the sign-in transaction is ended')
  t.equal(at.stack.upstream.requests.length, upstreamBefore, 'nothing reached the upstream')
}

/** The ID token the session of `browser` holds, as the logout endpoint hands it to the provider. */
async function sessionIdToken(stack: Stack, browser: Browser): Promise<string> {
  const logout = await browser.fetch(`${stack.gw}/api/v1/openid/logout`, { method: 'DELETE' })
  const endSession = ((await logout.json()) as { value: string }).value
  return new URL(endSession).searchParams.get('id_token_hint') ?? ''
}

/** The modules in the plan's order; the choice made where the specification allows one is in docs/conformance.md. */
export const BASIC_RP_MODULES: readonly Module[] = [
  {
    name: 'oidcc-client-test',
    old: 'rp-response_type-code',
    async run(t, plan) {
      const real = await realStack(t, plan)
      const verdict = await signInPlan(t, plan, real)
      const request = verdict.authorizationRequest
      t.equal(request?.searchParams.get('response_type'), 'code', 'the authorization code flow')
      t.ok(request?.searchParams.get('scope')?.split(' ').includes('openid'), 'scope openid')
      t.ok(request?.searchParams.get('state'), 'a state')
      t.ok(request?.searchParams.get('nonce'), 'a nonce')
      t.equal(request?.searchParams.get('code_challenge_method'), 'S256', 'PKCE')
      await assertSignedIn(t, real, verdict, 'alice')
    },
  },
  {
    name: 'oidcc-client-test-invalid-iss',
    old: 'rp-id_token-issuer-mismatch',
    run: (t, plan) => assertIdTokenRefused(t, plan, plan.shared, { idTokenClaims: { iss: `${plan.shared.provider.issuer}1` } }),
  },
  {
    name: 'oidcc-client-test-missing-sub',
    old: 'rp-id_token-sub',
    run: (t, plan) => assertIdTokenRefused(t, plan, plan.shared, { idTokenClaims: { sub: undefined } }),
  },
  {
    name: 'oidcc-client-test-invalid-aud',
    old: 'rp-id_token-aud',
    run: (t, plan) => assertIdTokenRefused(t, plan, plan.shared, { idTokenClaims: { aud: `${CLIENT_ID}1` } }),
  },
  {
    name: 'oidcc-client-test-missing-iat',
    old: 'rp-id_token-iat',
    run: (t, plan) => assertIdTokenRefused(t, plan, plan.shared, { idTokenClaims: { iat: undefined } }),
  },
  {
    name: 'oidcc-client-test-kid-absent-single-jwks',
    old: 'rp-id_token-kid-absent-single-jwks',
    async run(t, plan) {
      // One RSA signing key, one each of P-256, secp256k1 and Ed25519, no kid anywhere: the RS256
      // token without kid fits exactly one key, which is used (Core 10.1).
      const at = await adversarialStack(t, plan, { keysWithoutKid: 1 })
      const jwks = (await (await fetch(`${at.provider.issuer}/jwks`)).json()) as { keys: jose.JWK[] }
      t.notOk(
        jwks.keys.some((k) => k.use === 'sig' && k.kid !== undefined),
        'no signing key has a kid',
      )
      const verdict = await signInPlan(t, plan, at.stack)
      await assertSignedIn(t, at.stack, verdict, SUBJECT)
    },
  },
  {
    name: 'oidcc-client-test-kid-absent-multiple-jwks',
    old: 'rp-id_token-kid-absent-multiple-jwks',
    async run(t, plan) {
      // Three RSA signing keys without kid (and three of each other type): which one signed is not
      // said. The module accepts either trying each or refusing; the gateway refuses (docs/conformance.md).
      const at = await adversarialStack(t, plan, { keysWithoutKid: 3 })
      await assertIdTokenRefused(t, plan, at, {})
    },
  },
  {
    name: 'oidcc-client-test-idtoken-sig-rs256',
    old: 'rp-id_token-sig-rs256',
    async run(t, plan) {
      const real = await realStack(t, plan, { provider: { idTokenSigningAlg: 'RS256' } })
      const verdict = await signInPlan(t, plan, real)
      await assertSignedIn(t, real, verdict, 'alice')
      t.equal(jose.decodeProtectedHeader(await sessionIdToken(real, verdict.browser)).alg, 'RS256', 'the ID token was signed RS256')
    },
  },
  {
    name: 'oidcc-client-test-idtoken-sig-none',
    old: 'rp-id_token-sig-none',
    async run(t, plan) {
      // The provider advertises none next to RS256 and hands out an unsigned ID token from the token
      // endpoint. Core 3.1.3.7 would let a code-flow client accept it; the gateway never does.
      const at = await adversarialStack(t, plan, { advertisedAlgs: ['RS256', 'none'] })
      await assertIdTokenRefused(t, plan, at, { idToken: 'alg-none' })
    },
  },
  {
    name: 'oidcc-client-test-invalid-sig-rs256',
    old: 'rp-id_token-bad-sig-rs256',
    async run(t, plan) {
      // The module's token: the published key and kid, the signature spoiled.
      await assertIdTokenRefused(t, plan, plan.shared, { idToken: 'bad-signature' })
      // And a valid signature by a key that is not published, claiming the published kid.
      await assertIdTokenRefused(t, plan, plan.shared, { idToken: 'unknown-key-same-kid' })
    },
  },
  {
    name: 'oidcc-client-test-userinfo-invalid-sub',
    old: 'rp-userinfo-bad-sub-claim',
    async run(t, plan) {
      // The userinfo endpoint answers with another sub than the ID token's. The gateway takes the
      // identity from the verified ID token only and never calls userinfo, so that sub cannot become
      // the user's identity (docs/conformance.md).
      const at = await adversarialStack(t, plan, {
        userinfoEndpoint: true,
        behaviour: { userinfoClaims: { sub: `${SUBJECT}invalid`, email: 'intruder@example.com' } },
      })
      const verdict = await signInPlan(t, plan, at.stack)
      const headers = await assertSignedIn(t, at.stack, verdict, SUBJECT)
      t.equal(headers['x-forwarded-email'], 'adversary@example.com', "the ID token's email, not the userinfo answer's")
      t.equal(at.provider.userinfoRequests, 0, 'the userinfo endpoint is never called')
    },
  },
  {
    name: 'oidcc-client-test-nonce-invalid',
    old: 'rp-nonce-invalid',
    run: (t, plan) => assertIdTokenRefused(t, plan, plan.shared, { idTokenClaims: { nonce: 'a-nonce-of-another-transaction' } }),
  },
  {
    name: 'oidcc-client-test-scope-userinfo-claims',
    old: 'rp-scope-userinfo-claims',
    async run(t, plan) {
      const real = await realStack(t, plan)
      const verdict = await signInPlan(t, plan, real, { username: 'bob' })
      const scopes = verdict.authorizationRequest?.searchParams.get('scope')?.split(' ') ?? []
      t.ok(scopes.includes('profile') && scopes.includes('email'), `claims asked for by scope: ${scopes.join(' ')}`)
      const headers = await assertSignedIn(t, real, verdict, 'bob')
      const claims = devAccountClaims('bob')
      t.equal(headers['x-forwarded-email'], claims.email, 'the email scope: email reaches the upstream')
      t.equal(headers['x-forwarded-preferred-username'], claims.preferred_username, 'the profile scope: preferred_username reaches the upstream')
    },
  },
  {
    name: 'oidcc-client-test-client-secret-basic',
    old: 'rp-token_endpoint-client_secret_basic',
    async run(t, plan) {
      const real = await realStack(t, plan, {
        client: { tokenEndpointAuthMethod: 'client_secret_basic' },
        gatewayProvider: { clientAuthMethod: 'client_secret_basic' },
      })
      const seen: Array<{ authorization: string | undefined; body: Record<string, unknown> | undefined }> = []
      real.provider?.provider.on('grant.success', (ctx: { req: IncomingMessage; oidc: { body?: Record<string, unknown> } }) =>
        seen.push({ authorization: ctx.req.headers.authorization, body: ctx.oidc.body }),
      )
      const verdict = await signInPlan(t, plan, real)
      await assertSignedIn(t, real, verdict, 'alice')
      t.equal(seen.length, 1, 'one grant at the token endpoint')
      // RFC 6749 2.3.1: client_id and secret form-urlencoded (the unreserved characters of
      // RFC 3986 2.3, the secret's `-` among them, as they are), joined by a colon, in Basic.
      const header = seen[0]?.authorization ?? ''
      t.match(header, /^Basic [A-Za-z0-9+/]+=*$/, 'the provider received an Authorization: Basic header')
      const [id = '', secret = ''] = Buffer.from(header.slice(6), 'base64').toString('utf8').split(':')
      t.same([decodeURIComponent(id), decodeURIComponent(secret)], [CLIENT_ID, CLIENT_SECRET], 'carrying the client id and secret')
      t.equal(seen[0]?.body?.grant_type, 'authorization_code', 'the token request body was read')
      t.equal(seen[0]?.body?.client_secret, undefined, 'the secret is not in the token request body')
      const { status } = await proxiedIdentity(real, verdict.browser)
      t.equal(status, 200)
    },
  },
]

/**
 * Runs the plan: one tap test per module, in order, each a whole sign-in in a fresh browser with
 * the gateway's `provider.responseMode` set to `mode`.
 */
export async function runBasicRpModules(t: Test, mode: ResponseMode): Promise<void> {
  const shared = await startAdversarialStack(t, { config: { provider: { responseMode: mode } } })
  const plan: Plan = { mode, shared }
  t.beforeEach(() => shared.provider.reset())
  for (const module of BASIC_RP_MODULES) {
    await t.test(`${module.name} (${module.old})`, (t) => module.run(t, plan))
  }
}
