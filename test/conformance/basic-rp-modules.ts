// The modules of the OpenID Foundation's Basic RP plan (oidcc-client-basic-certification-test-plan,
// openid-certification/conformance-suite OIDCCClientBasicTestPlan), as one runner parameterised by
// the response mode: the Form Post RP plan (oidcc-client-formpost-basic-certification-test-plan)
// is exactly these modules with response_mode=form_post (AbstractFormPostTestPlan
// changeResponseTypeToFormPost). Each module runs against the adversarial provider
// (test/fixtures/adversarial-provider.ts), which misbehaves as the module's test server does and
// answers with a self-posting form when asked for form_post. Tests are named
// `<module> (<old rp-* name>)` (test/conformance naming, docs/conformance.md).

import type { Test } from 'tap'
import { startAdversarialStack, SUBJECT, type AdversarialProvider, type Behaviour } from '../fixtures/adversarial-provider.js'
import type { Browser } from '../fixtures/browser.js'
import { problemCode } from '../fixtures/http.js'
import type { Stack } from '../fixtures/stack.js'

export type ResponseMode = 'query' | 'form_post'

/** How a module ends: signed in, or refused with this problem code. */
type Expect = 'signed-in' | 'id_token_invalid'

interface Module {
  name: string
  old: string
  behaviour: Partial<Behaviour>
  /** The provider's behaviour from its start, in a stack of the module's own (keys the gateway loads once). */
  atStart?: Partial<Behaviour>
  expect: Expect
  /** What else the module asks of the RP, checked after the sign-in. */
  also?: (t: Test, ctx: { stack: Stack; provider: AdversarialProvider; browser: Browser; authorization: URL }) => Promise<void> | void
}

/** The modules in the plan's order; the choice made where the specification allows one is in docs/conformance.md. */
export const BASIC_RP_MODULES: readonly Module[] = [
  {
    name: 'oidcc-client-test',
    old: 'rp-response_type-code',
    behaviour: {},
    expect: 'signed-in',
    also: (t, { authorization }) => {
      t.equal(authorization.searchParams.get('response_type'), 'code', 'response_type=code')
      t.match(authorization.searchParams.get('scope'), /(^| )openid( |$)/, 'scope openid')
    },
  },
  { name: 'oidcc-client-test-invalid-iss', old: 'rp-id_token-issuer-mismatch', behaviour: { idTokenClaims: { iss: 'https://evil.example' } }, expect: 'id_token_invalid' },
  { name: 'oidcc-client-test-missing-sub', old: 'rp-id_token-sub', behaviour: { idTokenClaims: { sub: undefined } }, expect: 'id_token_invalid' },
  { name: 'oidcc-client-test-invalid-aud', old: 'rp-id_token-aud', behaviour: { idTokenClaims: { aud: 'another-client' } }, expect: 'id_token_invalid' },
  { name: 'oidcc-client-test-missing-iat', old: 'rp-id_token-iat', behaviour: { idTokenClaims: { iat: undefined } }, expect: 'id_token_invalid' },
  // One key in the JWKS and no kid: that key verifies (Core 10.1).
  { name: 'oidcc-client-test-kid-absent-single-jwks', old: 'rp-id_token-kid-absent-single-jwks', behaviour: { idToken: 'no-kid' }, expect: 'signed-in' },
  // Several keys and no kid: refused rather than tried in turn (choice).
  { name: 'oidcc-client-test-kid-absent-multiple-jwks', old: 'rp-id_token-kid-absent-multiple-jwks', behaviour: { idToken: 'no-kid' }, atStart: { publishSecondKey: true }, expect: 'id_token_invalid' },
  { name: 'oidcc-client-test-idtoken-sig-rs256', old: 'rp-id_token-sig-rs256', behaviour: { idToken: 'valid' }, expect: 'signed-in' },
  // An unsigned ID token is refused even from the token endpoint over TLS (choice: Core 3.1.3.7 step 6 allows skipping the signature; the gateway does not).
  { name: 'oidcc-client-test-idtoken-sig-none', old: 'rp-id_token-sig-none', behaviour: { idToken: 'alg-none' }, expect: 'id_token_invalid' },
  { name: 'oidcc-client-test-invalid-sig-rs256', old: 'rp-id_token-bad-sig-rs256', behaviour: { idToken: 'unknown-key-same-kid' }, expect: 'id_token_invalid' },
  {
    // The gateway never calls the UserInfo endpoint: identity comes from the verified ID token
    // alone, so a UserInfo answer about another sub can never be taken (choice).
    name: 'oidcc-client-test-userinfo-invalid-sub',
    old: 'rp-userinfo-bad-sub-claim',
    behaviour: {},
    expect: 'signed-in',
    also: (t, { stack }) => t.equal(stack.upstream.requests.at(-1)?.headers['x-forwarded-user'], SUBJECT, "the identity is the ID token's sub"),
  },
  { name: 'oidcc-client-test-nonce-invalid', old: 'rp-nonce-invalid', behaviour: { idTokenClaims: { nonce: 'another-nonce' } }, expect: 'id_token_invalid' },
  {
    // The claims the scopes ask for are read from the ID token (no UserInfo call, choice).
    name: 'oidcc-client-test-scope-userinfo-claims',
    old: 'rp-scope-userinfo-claims',
    behaviour: { idTokenClaims: { email: 'adversary@example.com' } },
    expect: 'signed-in',
    also: (t, { stack, authorization }) => {
      t.match(authorization.searchParams.get('scope'), /email/, 'the email scope is asked for')
      t.equal(stack.upstream.requests.at(-1)?.headers['x-forwarded-email'], 'adversary@example.com', 'its claim reaches the upstream')
    },
  },
  {
    name: 'oidcc-client-test-client-secret-basic',
    old: 'rp-token_endpoint-client_secret_basic',
    behaviour: {},
    expect: 'signed-in',
    also: (t, { provider }) => {
      // The provider accepts Basic or the form; the secret is not in the form, so Basic was used.
      t.equal(provider.lastTokenRequest?.get('client_secret'), null, 'the secret is not in the token request body: client_secret_basic')
    },
  },
]

/**
 * One tap test per module, each a whole sign-in in a fresh browser against one adversarial stack
 * with `provider.responseMode: <mode>`.
 */
export async function runBasicRpModules(t: Test, mode: ResponseMode): Promise<void> {
  const config = { provider: { responseMode: mode } }
  const shared = await startAdversarialStack(t, { config })
  for (const module of BASIC_RP_MODULES) {
    await t.test(`${module.name} (${module.old})`, async (t) => {
      const { stack, provider } = module.atStart === undefined ? shared : await startAdversarialStack(t, { config, provider: { behaviour: module.atStart } })
      provider.reset()
      provider.set(module.behaviour)
      const browser = stack.browser()
      const res = await browser.signIn(`${stack.gw}/api/v1/openid/redirect`, 'unused')
      const authorization = new URL(browser.history.find((u) => u.startsWith(`${provider.issuer}/authorize?`)) ?? 'http://x')
      t.equal(authorization.searchParams.get('response_mode'), mode === 'form_post' ? 'form_post' : null, `response_mode for ${mode}`)
      const callback = browser.history.at(-1) ?? ''
      t.equal(callback.includes('code='), mode === 'query', mode === 'query' ? 'the response in the query' : 'the response posted, not in the URL')
      if (module.expect === 'signed-in') {
        t.equal(res.status, 200, 'signed in')
        const page = await browser.fetch(`${stack.gw}/whoami`, { headers: { accept: 'application/json' } })
        t.equal(page.status, 200, 'a proxied request is signed in')
      } else {
        t.equal(res.status, 403, 'refused')
        t.equal(await problemCode(res), module.expect)
        t.notOk(browser.cookies().some((c) => c.name === 'ogw'), 'no session')
      }
      await module.also?.(t, { stack, provider, browser, authorization })
    })
  }
}
