import { randomUUID } from 'node:crypto'
import t from 'tap'
import { sessionCookiesSet, startAdversarialStack, SUBJECT } from '../fixtures/adversarial-provider.ts'
import { problemCode, rawRequest } from '../fixtures/http.ts'
import type { Stack } from '../fixtures/stack.ts'

// A token signed with a key the gateway has not seen yet (the provider
// rotated: a new kid, published after the gateway fetched the JWKS) costs one JWKS refetch and
// then verifies; tokens with made-up kids cost at most one refetch per interval (src/oidc/provider-keys.ts).

const JSON_ACCEPT = { accept: 'application/json' }

async function signIn(stack: Stack): Promise<Response> {
  return stack.browser().signIn(`${stack.gw}/api/v1/openid/redirect`, 'unused')
}

function bearer(stack: Stack, token: string) {
  return rawRequest(stack.gw, '/api', { headers: { ...JSON_ACCEPT, authorization: `Bearer ${token}` } })
}

t.test('ID tokens: a new key is fetched once, then used', async (t) => {
  const { stack, provider } = await startAdversarialStack(t)
  t.equal(provider.jwksRequests, 1, 'the keys are loaded with the metadata')
  const first = await signIn(stack)
  t.equal(first.status, 200, 'signed in with the first key')
  await first.arrayBuffer()
  t.equal(provider.jwksRequests, 1, 'no fetch for a known key')

  const kid = await provider.rotateKey()
  t.not(kid, 'adversary-key-1')
  const rotated = await signIn(stack)
  t.equal(rotated.status, 200, 'signed in with the new key')
  t.ok(sessionCookiesSet(rotated).includes('ogw'))
  await rotated.arrayBuffer()
  t.equal(provider.jwksRequests, 2, 'exactly one refetch')

  const again = await signIn(stack)
  t.equal(again.status, 200)
  await again.arrayBuffer()
  t.equal(provider.jwksRequests, 2, 'the new key is cached')
})

t.test('ID tokens with made-up kids: 403, and at most one refetch', async (t) => {
  const { stack, provider } = await startAdversarialStack(t, { provider: { behaviour: { idToken: 'random-kid' } } })
  const before = provider.jwksRequests
  for (let i = 0; i < 10; i++) {
    const res = await signIn(stack)
    t.equal(res.status, 403, `sign-in ${i}`)
    t.equal(await problemCode(res), 'id_token_invalid')
  }
  t.ok(provider.jwksRequests - before <= 1, `${provider.jwksRequests - before} refetches for 10 unknown kids`)
})

t.test('Bearer JWTs', async (t) => {
  const { stack, provider } = await startAdversarialStack(t)

  t.test('a single published key and no kid: accepted', async (t) => {
    const res = await bearer(stack, await provider.signJwt({}, { kid: null }))
    t.equal(res.status, 200)
    t.equal(stack.upstream.requests.at(-1)?.headers['x-forwarded-user'], SUBJECT)
  })

  t.test('a new key is fetched once, then used', async (t) => {
    const known = await bearer(stack, await provider.signJwt())
    t.equal(known.status, 200)
    const before = provider.jwksRequests
    await provider.rotateKey()
    const token = await provider.signJwt({ sub: 'rotated-service' })
    const res = await bearer(stack, token)
    t.equal(res.status, 200, 'verified with the new key')
    t.equal(stack.upstream.requests.at(-1)?.headers['x-forwarded-user'], 'rotated-service')
    t.equal(provider.jwksRequests, before + 1, 'exactly one refetch')
    t.equal((await bearer(stack, await provider.signJwt({ sub: 'another' }))).status, 200)
    t.equal(provider.jwksRequests, before + 1, 'the new key is cached')
  })

  t.test('no kid with two published keys: refused (no trying keys until one fits)', async (t) => {
    t.equal((await bearer(stack, await provider.signJwt({}, { kid: null }))).status, 401)
  })
})

t.test('Bearer JWTs with made-up kids: all 401, at most one refetch', async (t) => {
  const { stack, provider } = await startAdversarialStack(t)
  const before = provider.jwksRequests
  const tokens = await Promise.all(Array.from({ length: 20 }, () => provider.signJwt({}, { kid: randomUUID() })))
  const parallel = await Promise.all(tokens.map((token) => bearer(stack, token)))
  t.same(
    parallel.map((res) => res.status),
    tokens.map(() => 401),
    '20 at once',
  )
  const sequential: number[] = []
  for (const token of await Promise.all(Array.from({ length: 20 }, () => provider.signJwt({}, { kid: randomUUID() })))) {
    sequential.push((await bearer(stack, token)).status)
  }
  t.same(
    sequential,
    tokens.map(() => 401),
    '20 one after the other',
  )
  t.ok(provider.jwksRequests - before <= 1, `${provider.jwksRequests - before} refetches for 40 unknown kids`)
  t.equal((await bearer(stack, await provider.signJwt())).status, 200, 'the known key still works')
  t.equal(stack.upstream.requests.length, 1, 'only that one reached the upstream')
})

t.test('the JWKS unreachable when a new key shows up: 502 at sign-in, 401 for Bearer', async (t) => {
  const { stack, provider } = await startAdversarialStack(t)
  const before = provider.jwksRequests
  provider.set({ jwks: 'server_error' })
  await provider.rotateKey()
  const res = await signIn(stack)
  t.equal(res.status, 502, 'the user did nothing wrong')
  t.equal(await problemCode(res), 'provider_unavailable')
  t.equal((await bearer(stack, await provider.signJwt())).status, 401)
  t.equal(provider.jwksRequests, before + 1, 'one attempt, the Bearer lookup waits for the next interval')
})
