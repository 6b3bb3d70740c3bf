import * as jose from 'jose'
import t from 'tap'
import { KeysNotLoadedError, MAX_AGE_MS, ProviderKeys, UNKNOWN_KEY_REFETCH_MS } from '#src/oidc/provider-keys'
import { startAdversarialProvider, type AdversarialProvider } from '../fixtures/adversarial-provider.ts'
import type { Teardown } from '../fixtures/stack.ts'

// The refetch rules of the provider's key set, on a clock the test moves (src/oidc/provider-keys.ts).

interface Setup {
  keys: ProviderKeys
  provider: AdversarialProvider
  clock: { now: number }
  warnings: unknown[]
}

async function setup(t: Teardown): Promise<Setup> {
  const provider = await startAdversarialProvider()
  t.teardown(() => provider.close())
  const clock = { now: 1_000_000 }
  const warnings: unknown[] = []
  const keys = new ProviderKeys({ timeoutMs: 2000, log: { warn: (obj: unknown) => void warnings.push(obj) }, now: () => clock.now })
  await keys.load(new URL(`${provider.issuer}/jwks`))
  return { keys, provider, clock, warnings }
}

const header = (kid: string | undefined): jose.JWSHeaderParameters => (kid === undefined ? { alg: 'RS256' } : { alg: 'RS256', kid })

t.test('before load: no key and no request', async (t) => {
  const keys = new ProviderKeys({ timeoutMs: 1000, log: { warn: () => undefined } })
  await t.rejects(keys.getKey(header('x')), KeysNotLoadedError)
  t.equal(keys.exported(), undefined)
  t.equal(keys.loaded, false)
})

t.test('a known kid needs no request; exported() is stamped now', async (t) => {
  const { keys, provider, clock } = await setup(t)
  t.equal(provider.jwksRequests, 1)
  t.ok(await keys.getKey(header(provider.currentKid)))
  t.equal(provider.jwksRequests, 1)
  clock.now += 120_000
  t.equal(keys.exported()?.uat, Math.floor(clock.now / 1000), 'openid-client must take the set as fresh')
  t.equal(keys.exported()?.jwks.keys.length, 1)
})

t.test('an unknown kid: one refetch, rate-limited per interval, shared by concurrent lookups', async (t) => {
  const { keys, provider, clock } = await setup(t)
  const rotated = await provider.rotateKey()
  const results = await Promise.allSettled([keys.getKey(header(rotated)), keys.getKey(header(rotated)), keys.getKey(header('made-up'))])
  t.same(
    results.map((r) => r.status),
    ['fulfilled', 'fulfilled', 'rejected'],
  )
  t.equal(provider.jwksRequests, 2, 'one request for three lookups')

  const second = await provider.rotateKey()
  clock.now += UNKNOWN_KEY_REFETCH_MS - 1
  await t.rejects(keys.getKey(header(second)), jose.errors.JWKSNoMatchingKey, 'within the interval: refused without a request')
  t.equal(provider.jwksRequests, 2)
  clock.now += 1
  t.ok(await keys.getKey(header(second)), 'after the interval: refetched')
  t.equal(provider.jwksRequests, 3)
})

t.test('prepare() swallows what the token did wrong, not what the provider did', async (t) => {
  const { keys, provider } = await setup(t)
  await keys.prepare(header('made-up'))
  await keys.prepare({ alg: 'HS256', kid: provider.currentKid })
  t.equal(provider.jwksRequests, 2, 'the made-up kid cost one refetch; HS256 none')
  await provider.close()
  const unreachable = new ProviderKeys({ timeoutMs: 500, log: { warn: () => undefined } })
  await t.rejects(unreachable.load(new URL(`${provider.issuer}/jwks`)))
})

t.test('a stale set is refetched before use; a failing provider leaves the old keys in use', async (t) => {
  const { keys, provider, clock, warnings } = await setup(t)
  clock.now += MAX_AGE_MS
  t.ok(await keys.getKey(header(provider.currentKid)))
  t.equal(provider.jwksRequests, 2, 'refetched once stale')
  const kid = provider.currentKid
  await provider.close()
  clock.now += MAX_AGE_MS
  t.ok(await keys.getKey(header(kid)), 'the last keys still verify')
  t.equal(warnings.length, 1, 'the failed refresh is logged')
  t.ok(await keys.getKey(header(kid)))
  t.equal(warnings.length, 1, 'and not retried at once')
})

t.test('a JWKS endpoint answering something else is a provider fault', async (t) => {
  const provider = await startAdversarialProvider()
  t.teardown(() => provider.close())
  const keys = new ProviderKeys({ timeoutMs: 1000, log: { warn: () => undefined } })
  await t.rejects(keys.load(new URL(`${provider.issuer}/nope`)), { name: 'ProviderFaultError' }, '404')
  await t.rejects(keys.load(new URL(`${provider.issuer}/.well-known/openid-configuration`)), { name: 'ProviderFaultError' }, 'not a key set')
})
