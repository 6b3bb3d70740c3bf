import t from 'tap'
import { rawRequest } from '../fixtures/http.ts'
import { startStack, type Stack, type Teardown } from '../fixtures/stack.ts'

// Opaque Bearer tokens checked at the provider's RFC 7662 introspection
// endpoint (the dev oidc-provider issues opaque access tokens), only when
// provider.bearer.introspection is on.

const INTROSPECTION = { provider: { bearer: { introspection: true } } }

/** A sign-in without redirectAfter: the callback answers the (opaque) access token as `value`. */
async function accessToken(stack: Stack, username: string): Promise<string> {
  const res = await stack.browser().signIn(`${stack.gw}/api/v1/openid/redirect`, username)
  if (res.status !== 200) throw new Error(`sign-in failed: ${res.status}`)
  return ((await res.json()) as { value: string }).value
}

/** A fresh client: no cookies, only the Authorization header. */
function call(stack: Stack, token: string) {
  return rawRequest(stack.gw, '/api/items', { headers: { accept: 'application/json', authorization: `Bearer ${token}` } })
}

/**
 * Counts the gateway's requests to the introspection endpoint. The gateway runs in this process
 * and every provider request goes through the global fetch (src/oidc/fetch.ts), so a counting
 * wrapper sees them all.
 */
function countIntrospections(t: Teardown, stack: Stack): { readonly count: number } {
  const counter = { count: 0 }
  const endpoint = `${stack.provider?.issuer}/token/introspection`
  const original = globalThis.fetch
  globalThis.fetch = (input, init) => {
    if (String(input) === endpoint) counter.count++
    return original(input, init)
  }
  t.teardown(() => {
    globalThis.fetch = original
  })
  return counter
}

t.test('introspection on: an opaque access token signs the request in', async (t) => {
  const stack = await startStack(t, { config: INTROSPECTION })
  const introspections = countIntrospections(t, stack)
  const token = await accessToken(stack, 'alice')
  t.notOk(token.includes('.'), 'the dev provider issues opaque access tokens')

  const res = await call(stack, token)
  t.equal(res.status, 200)
  const seen = stack.upstream.requests.at(-1)?.headers
  t.equal(seen?.['x-forwarded-user'], 'alice', 'identity from the introspection response')
  t.equal(introspections.count, 1)

  t.equal((await call(stack, token)).status, 200)
  t.equal(introspections.count, 1, 'the second call is answered from the cache')

  const unknown = await call(stack, 'an-opaque-token-the-provider-never-issued')
  t.equal(unknown.status, 401)
  t.equal(unknown.json<{ code: string }>().code, 'unauthenticated')
  t.equal(introspections.count, 2)
  t.equal((await call(stack, 'an-opaque-token-the-provider-never-issued')).status, 401)
  t.equal(introspections.count, 2, 'a refused token is not asked about again at once')
  t.equal(stack.upstream.requests.length, 2, 'only the accepted calls reached the upstream')
})

t.test('introspection off (the default): the same opaque token is refused', async (t) => {
  const stack = await startStack(t)
  const introspections = countIntrospections(t, stack)
  const token = await accessToken(stack, 'alice')
  const res = await call(stack, token)
  t.equal(res.status, 401)
  t.equal(
    res.headers['www-authenticate'],
    `Bearer error="invalid_token", resource_metadata="${stack.gw}/.well-known/oauth-protected-resource"`,
    'a token came and was refused (RFC 6750 3.1)',
  )
  t.equal(introspections.count, 0, 'the provider is not asked')
  t.equal(stack.upstream.requests.length, 0)
})

t.test('provider down during introspection: 401, never 500; cached tokens keep working', async (t) => {
  const stack = await startStack(t, { config: INTROSPECTION })
  const cached = await accessToken(stack, 'alice')
  const fresh = await accessToken(stack, 'bob')
  t.equal((await call(stack, cached)).status, 200)
  await stack.provider?.close()
  const res = await call(stack, fresh)
  t.equal(res.status, 401)
  t.equal(res.json<{ code: string }>().code, 'unauthenticated')
  t.equal((await call(stack, cached)).status, 200, 'introspected before the outage: still cached')
  t.equal(stack.upstream.requests.at(-1)?.headers['x-forwarded-user'], 'alice')
})
