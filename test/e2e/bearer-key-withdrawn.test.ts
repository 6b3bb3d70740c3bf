import t from 'tap'
import { startAdversarialStack, SUBJECT } from '../fixtures/adversarial-provider.ts'
import { rawRequest } from '../fixtures/http.ts'
import type { Stack } from '../fixtures/stack.ts'

// A Bearer JWT the gateway verified and cached stops working once the provider withdraws the key
// that signed it (a key compromise: the provider rotates to a new key and takes the old one out
// of its JWKS), at the next JWKS fetch, not at the token's `exp` (src/oidc/provider-keys.ts generations).

function bearer(stack: Stack, token: string) {
  return rawRequest(stack.gw, '/api', { headers: { accept: 'application/json', authorization: `Bearer ${token}` } })
}

t.test('a cached token whose key left the JWKS is refused after the next fetch', async (t) => {
  const { stack, provider } = await startAdversarialStack(t)
  const oldKid = provider.currentKid
  const early = await provider.signJwt({ sub: 'signed-with-the-old-key' })
  t.equal((await bearer(stack, early)).status, 200, 'verified, now cached')
  t.equal((await bearer(stack, early)).status, 200, 'from the cache')
  const before = provider.jwksRequests

  await provider.rotateKey()
  provider.retireKey(oldKid)
  // A token with the new kid makes the gateway fetch the JWKS (the unknown-key refetch).
  const fresh = await provider.signJwt({ sub: 'signed-with-the-new-key' })
  t.equal((await bearer(stack, fresh)).status, 200, 'the new key verifies')
  t.equal(provider.jwksRequests, before + 1, 'one fetch brought the new set')

  const res = await bearer(stack, early)
  t.equal(res.status, 401, 'the old key is gone: its cached token no longer signs in')
  t.match(res.headers['www-authenticate'], /error="invalid_token"/)
  t.equal((await bearer(stack, fresh)).status, 200, 'a token of a key still published keeps working')
  t.equal(stack.upstream.requests.at(-1)?.headers['x-forwarded-user'], 'signed-with-the-new-key')
  t.ok(provider.jwksRequests - before <= 2, 'the old token costs at most one more (rate-limited) fetch')
})

t.test('a rotation that keeps the old key published keeps its cached tokens', async (t) => {
  const { stack, provider } = await startAdversarialStack(t)
  const early = await provider.signJwt()
  t.equal((await bearer(stack, early)).status, 200)
  await provider.rotateKey()
  t.equal((await bearer(stack, await provider.signJwt({ sub: 'new' }))).status, 200)
  t.equal((await bearer(stack, early)).status, 200, 'verified again with the new set, where its key still is')
  t.equal(stack.upstream.requests.at(-1)?.headers['x-forwarded-user'], SUBJECT)
})
