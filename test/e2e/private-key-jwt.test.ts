// provider.clientAuthMethod private_key_jwt against a real oidc-provider that knows the client
// only by its public keys, registered as `openid-gateway jwks` prints them.

import { generateKeyPairSync } from 'node:crypto'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import * as jose from 'jose'
import t from 'tap'
import { clientJwks } from '#src/oidc/client-auth'
import type { ProviderConfig } from '#src/options/types'
import { problemCode } from '../fixtures/http.ts'
import { startStack, type Stack, type Teardown } from '../fixtures/stack.ts'

const dir = mkdtempSync(join(tmpdir(), 'ogw-pkjwt-'))
const ecFile = join(dir, 'client.pem')
writeFileSync(ecFile, generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ format: 'pem', type: 'pkcs8' }))
const rsaJwk = JSON.stringify({ ...generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ format: 'jwk' }), kid: 'rsa-2026' })

async function registered(clientKey: string): Promise<{ keys: jose.JWK[] }> {
  const jwks = await clientJwks({ clientAuthMethod: 'private_key_jwt', clientKey } as ProviderConfig)
  if (jwks === undefined) throw new Error('no JWKS')
  return jwks
}

async function stackWith(t: Teardown, gatewayKey: string, registeredKey = gatewayKey): Promise<{ stack: Stack; assertions: string[] }> {
  const stack = await startStack(t, {
    provider: { rotateRefreshTokens: true },
    client: { clientSecret: undefined, tokenEndpointAuthMethod: 'private_key_jwt', jwks: await registered(registeredKey) },
    config: { provider: { clientSecret: undefined, clientAuthMethod: 'private_key_jwt', clientKey: gatewayKey } },
  })
  // The client assertions the provider accepted, to read the algorithm and key id they used.
  const assertions: string[] = []
  stack.provider?.provider.on('grant.success', (ctx: { oidc: { params?: Record<string, unknown> } }) => {
    const assertion = ctx.oidc.params?.client_assertion
    if (typeof assertion === 'string') assertions.push(assertion)
  })
  return { stack, assertions }
}

t.test('EC key from a PEM file: sign-in and refresh authenticate with ES256 assertions', async (t) => {
  const { stack, assertions } = await stackWith(t, ecFile)
  const browser = await stack.signedIn('alice')
  const page = await browser.fetch(`${stack.gw}/x`, { headers: { accept: 'application/json' } })
  t.equal(page.status, 200)
  const refreshed = await browser.fetch(`${stack.gw}/api/v1/openid/refresh`)
  t.equal(refreshed.status, 200)
  t.equal(assertions.length, 2, 'the code and the refresh grant')
  const [{ kid }] = (await registered(ecFile)).keys as [{ kid: string }]
  for (const assertion of assertions) {
    t.equal(jose.decodeProtectedHeader(assertion).alg, 'ES256')
    t.equal(jose.decodeProtectedHeader(assertion).kid, kid, 'the kid printed by openid-gateway jwks (RFC 7638 thumbprint)')
  }
})

t.test('RSA key as an inline JWK: PS256, which the provider advertises, and the JWK kid', async (t) => {
  const { stack, assertions } = await stackWith(t, rsaJwk)
  const metadata = (await (await fetch(`${stack.provider?.issuer}/.well-known/openid-configuration`)).json()) as Record<string, string[]>
  t.ok(metadata.token_endpoint_auth_signing_alg_values_supported?.includes('RS256'), 'RS256 is advertised too: PS256 is preferred')
  const browser = await stack.signedIn('bob')
  t.equal((await browser.fetch(`${stack.gw}/x`, { headers: { accept: 'application/json' } })).status, 200)
  const header = jose.decodeProtectedHeader(assertions[0] ?? '')
  t.equal(header.alg, 'PS256')
  t.equal(header.kid, 'rsa-2026')
})

t.test('a key the provider does not know: invalid_client, a configuration fault: 502 provider_rejected_client, never code_invalid', async (t) => {
  const otherFile = join(dir, 'other.pem')
  writeFileSync(otherFile, generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ format: 'pem', type: 'pkcs8' }))
  const { stack, assertions } = await stackWith(t, otherFile, ecFile)
  const res = await stack.browser().signIn(`${stack.gw}/api/v1/openid/redirect`, 'alice')
  t.equal(res.status, 502)
  t.equal(await problemCode(res), 'provider_rejected_client')
  t.equal(assertions.length, 0)
})
