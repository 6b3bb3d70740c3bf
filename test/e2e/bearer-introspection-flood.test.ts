import t from 'tap'
import { rawRequest, type RawResponse } from '../fixtures/http.ts'
import { startStack, type Stack, type Teardown } from '../fixtures/stack.ts'

// Junk opaque tokens never turn a valid one away: against a slow provider, a flood of random
// tokens from one client holds at most its share of the introspection slots (valid tokens from
// another client are introspected and pass), and a flood from many clients makes the others wait
// (503 with Retry-After), never refuses them (401). src/oidc/bearer.ts, BearerVerifier.verify.

const CONFIG = {
  provider: { bearer: { introspection: true } },
  // The test's requests come from loopback and name their client in X-Forwarded-For.
  server: { trustedProxies: ['127.0.0.1'] },
}

async function accessToken(stack: Stack, username: string): Promise<string> {
  const res = await stack.browser().signIn(`${stack.gw}/api/v1/openid/redirect`, username)
  if (res.status !== 200) throw new Error(`sign-in failed: ${res.status}`)
  return ((await res.json()) as { value: string }).value
}

function call(stack: Stack, token: string, client: string): Promise<RawResponse> {
  return rawRequest(stack.gw, '/api/items', { headers: { accept: 'application/json', authorization: `Bearer ${token}`, 'x-forwarded-for': client } })
}

interface HeldProvider {
  /** Introspection requests the provider has received and not answered yet. */
  readonly underWay: number
  readonly total: number
  /** From now on the provider answers, those held first. */
  release(): void
}

/**
 * A provider slowed down to a halt: its introspection endpoint answers only once the test
 * releases it, so the slots the gateway has under way are exactly those the test sees. The
 * gateway runs in this process and every provider request goes through the global fetch
 * (src/oidc/fetch.ts), so the wrapper sees them all.
 */
function heldIntrospection(t: Teardown, stack: Stack): HeldProvider {
  let underWay = 0
  let total = 0
  let release!: () => void
  const released = new Promise<void>((resolve) => (release = resolve))
  const endpoint = `${stack.provider?.issuer}/token/introspection`
  const original = globalThis.fetch
  globalThis.fetch = async (input, init) => {
    if (String(input) !== endpoint) return original(input, init)
    underWay++
    total++
    try {
      await released
      return await original(input, init)
    } finally {
      underWay--
    }
  }
  t.teardown(() => {
    release()
    globalThis.fetch = original
  })
  return {
    get underWay() {
      return underWay
    },
    get total() {
      return total
    },
    release,
  }
}

/** Resolves once `condition` holds, checking on every turn of the event loop. */
async function until(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise((resolve) => setImmediate(resolve))
}

/** Requests sent at once, counting those answered. */
function send(requests: Array<() => Promise<RawResponse>>): { readonly answered: number; readonly all: Promise<RawResponse[]> } {
  let answered = 0
  const all = Promise.all(
    requests.map(async (request) => {
      const res = await request()
      answered++
      return res
    }),
  )
  return {
    get answered() {
      return answered
    },
    all,
  }
}

const junk = (i: number): string => `junk-${i}-${Math.random().toString(36).slice(2)}`

t.test('a junk flood from one client: valid tokens from another all pass', async (t) => {
  const stack = await startStack(t, { config: CONFIG })
  const valid = await Promise.all(['alice', 'bob', 'carol', 'dave', 'erin', 'frank'].map((user) => accessToken(stack, user)))
  const provider = heldIntrospection(t, stack)

  const flood = send(Array.from({ length: 200 }, (_, i) => () => call(stack, junk(i), '203.0.113.7')))
  // Every junk token is either held at the provider or already answered.
  await until(() => provider.underWay + flood.answered === 200)
  t.ok(provider.underWay <= 8, `the flooding client holds ${provider.underWay} of the 32 slots`)
  const answers = send(valid.map((token) => () => call(stack, token, '198.51.100.9')))
  // The valid tokens are at the provider too (or were turned away before reaching it).
  await until(() => provider.underWay + flood.answered + answers.answered === 200 + valid.length)
  provider.release()
  t.same(
    (await answers.all).map((res) => res.status),
    valid.map(() => 200),
    'every valid token signs in',
  )
  const floodStatuses = (await flood.all).map((res) => res.status)
  t.equal(floodStatuses.filter((status) => status === 200).length, 0, 'no junk token passes')
  t.ok(
    floodStatuses.every((status) => status === 401 || status === 429),
    'junk: refused (401) or over its budget (429)',
  )
  t.ok(floodStatuses.filter((status) => status === 429).length > 0, 'the flooding client was held to its budget')
  t.ok(provider.total <= 8 + valid.length, `the provider saw ${provider.total} introspections, not 200`)
})

t.test('a junk flood from many clients: valid tokens wait (503, Retry-After), never 401', async (t) => {
  const stack = await startStack(t, { config: CONFIG })
  const valid = await Promise.all(['alice', 'bob', 'carol'].map((user) => accessToken(stack, user)))
  const provider = heldIntrospection(t, stack)

  const flood = send(Array.from({ length: 80 }, (_, i) => () => call(stack, junk(i), `203.0.113.${(i % 10) + 1}`)))
  await until(() => provider.underWay + flood.answered === 80)
  t.equal(provider.underWay, 32, 'every slot is held')
  const answers = await Promise.all(valid.map((token) => call(stack, token, '198.51.100.9')))
  for (const res of answers) {
    t.equal(res.status, 503, 'the provider is saturated: come back, you are not refused')
    t.equal(res.json<{ code: string }>().code, 'decision_unavailable')
    t.equal(res.headers['retry-after'], '1')
    t.notOk(res.headers['www-authenticate'], 'no invalid_token challenge')
  }
  provider.release()
  t.equal((await flood.all).filter((res) => res.status === 200).length, 0, 'no junk token passes')
  const retried = await Promise.all(valid.map((token) => call(stack, token, '198.51.100.9')))
  t.same(
    retried.map((res) => res.status),
    valid.map(() => 200),
    'after Retry-After, the same tokens pass',
  )
})

t.test('a refused token is remembered: repeating it costs the provider nothing', async (t) => {
  const stack = await startStack(t, { config: CONFIG })
  const provider = heldIntrospection(t, stack)
  provider.release()
  const token = junk(0)
  t.equal((await call(stack, token, '203.0.113.7')).status, 401)
  const again = await Promise.all(Array.from({ length: 100 }, () => call(stack, token, '203.0.113.7')))
  t.same(
    again.map((res) => res.status),
    again.map(() => 401),
  )
  t.equal(provider.total, 1, 'one introspection for 101 uses')
})
