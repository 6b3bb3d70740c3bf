// OpenID Connect Core: Configuration Certification Profile Relying Party Tests
// (oidcc-client-config-certification-test-plan, response_type code), one test per module in the
// plan's order (OIDCCClientConfigTestPlan of openid-certification/conformance-suite), named
// `<module> (<old rp-* name>)` as docs/conformance.md lists them.
//
// What they ask: OpenID Connect Discovery 1.0 4 (the configuration at
// /.well-known/openid-configuration, its jwks_uri) and 4.3 (its issuer must be the one the client
// asked: otherwise the provider is refused), Core 10.1 (the provider may publish a new signing key
// at any time; a client that meets an unknown kid fetches the JWKS again).

import { randomBytes } from 'node:crypto'
import t from 'tap'
import { startAdversarialStack, SUBJECT } from '../fixtures/adversarial-provider.ts'
import { discoveryFailure, startStack } from '../fixtures/stack.ts'
import { assertRefused, assertSignedIn, signIn } from './runner.ts'

t.test('oidcc-client-test-discovery-openid-config (rp-discovery-openid-configuration)', async (t) => {
  // The gateway is given the issuer only: every endpoint it uses comes from the configuration.
  const real = await startStack(t)
  t.notOk('authorizationEndpoint' in (real.config.providers[0] ?? {}), 'no endpoint is configured')
  const metadata = (await (await fetch(`${real.provider?.issuer}/.well-known/openid-configuration`)).json()) as { authorization_endpoint: string }
  const verdict = await signIn(real)
  const request = verdict.authorizationRequest
  t.equal(
    request === undefined ? undefined : `${request.origin}${request.pathname}`,
    metadata.authorization_endpoint,
    'the authorization endpoint of the configuration',
  )
  await assertSignedIn(t, real, verdict, 'alice')
})

t.test('oidcc-client-test-discovery-jwks-uri-keys (rp-discovery-jwks_uri-keys)', async (t) => {
  // The jwks_uri changes with every run (the module appends a random suffix): only a client that
  // reads it from the configuration finds the keys.
  const jwksPath = `/jwks${randomBytes(5).toString('hex')}`
  const { stack, provider } = await startAdversarialStack(t, { provider: { jwksPath } })
  t.equal((await fetch(`${provider.issuer}/jwks`)).status, 404, 'nothing at the usual path')
  t.equal(provider.jwksRequests, 1, 'the keys were fetched from the advertised jwks_uri at discovery')
  await assertSignedIn(t, stack, await signIn(stack), SUBJECT)
})

t.test('oidcc-client-test-discovery-issuer-mismatch (rp-discovery-issuer-not-matching-config)', async (t) => {
  const lines: string[] = []
  const { stack, provider } = await startAdversarialStack(t, {
    provider: { metadataIssuer: 'http://127.0.0.1:1/INVALID' },
    config: { log: { level: 'warn' } },
    logStream: { write: (line) => void lines.push(line) },
    waitForProvider: false,
  })
  const failure = await discoveryFailure(lines)
  t.match(failure, { call: 'discovery', check: 'issuer', advertisedIssuer: 'http://127.0.0.1:1/INVALID' }, 'the log names the issuer check')
  const verdict = await signIn(stack)
  assertRefused(t, verdict, 503, 'provider_misconfigured')
  t.equal(verdict.authorizationRequest, undefined, 'the browser is never sent to the provider')
  t.equal(provider.authorizationRequests, 0, 'no authorization request')
  t.equal(provider.jwksRequests, 0, 'nothing else is fetched from a provider that is refused')
})

t.test('oidcc-client-test-idtoken-sig-none (rp-id_token-sig-none)', async (t) => {
  // The same module as in the Basic plan: an unsigned ID token from the token endpoint, always refused.
  const { stack, provider } = await startAdversarialStack(t, { provider: { advertisedAlgs: ['RS256', 'none'], behaviour: { idToken: 'alg-none' } } })
  const verdict = await signIn(stack)
  t.equal(provider.tokenRequests, 1, 'the code was redeemed')
  assertRefused(t, verdict, 403, 'id_token_invalid')
  t.ok(verdict.transactionCleared, 'the sign-in transaction is ended')
})

t.test('oidcc-client-test-signing-key-rotation-just-before-signing (rp-key-rotation-op-sign-key-native)', async (t) => {
  // The provider rotates its key right before it signs the ID token: the kid is not in the JWKS
  // the gateway loaded at discovery.
  const { stack, provider } = await startAdversarialStack(t, { provider: { behaviour: { rotateKeyBeforeSigning: true } } })
  const first = provider.currentKid
  t.equal(provider.jwksRequests, 1, 'the keys are loaded at discovery')
  await assertSignedIn(t, stack, await signIn(stack), SUBJECT)
  t.not(provider.currentKid, first, 'the ID token was signed with a new key')
  t.equal(provider.jwksRequests, 2, 'one refetch of the JWKS for the unknown kid')
})

t.test('oidcc-client-test-signing-key-rotation (rp-key-rotation-op-sign-key)', async (t) => {
  const { stack, provider } = await startAdversarialStack(t)
  await assertSignedIn(t, stack, await signIn(stack), SUBJECT)
  t.equal(provider.jwksRequests, 1, 'the first ID token verified with the keys of discovery')
  await provider.rotateKey()
  await assertSignedIn(t, stack, await signIn(stack), SUBJECT)
  t.equal(provider.jwksRequests, 2, 'the second, signed with the new key, cost one refetch')
  await assertSignedIn(t, stack, await signIn(stack), SUBJECT)
  t.equal(provider.jwksRequests, 2, 'and the new key is kept')
})
