import t from 'tap'
import { BearerVerifier } from '#src/oidc/bearer'
import { MAX_AGE_MS, ProviderKeys } from '#src/oidc/provider-keys'
import { startAdversarialProvider } from '../fixtures/adversarial-provider.ts'
import { manualClock } from '../fixtures/clock.ts'
import { CLIENT_ID, type Teardown } from '../fixtures/stack.ts'

// The generation of the provider's keys (src/oidc/provider-keys.ts) and the Bearer verifier's cache that
// follows it: a key withdrawn from the JWKS stops vouching for cached tokens at the age refresh,
// which using a cached token starts by itself, on a clock the test moves.

async function setup(t: Teardown) {
  const provider = await startAdversarialProvider()
  t.teardown(() => provider.close())
  const clock = manualClock()
  const keys = new ProviderKeys({ timeoutMs: 2000, log: { warn: () => undefined }, now: () => clock.now() })
  await keys.load(new URL(`${provider.issuer}/jwks`))
  const verifier = new BearerVerifier({
    issuer: provider.issuer,
    clientId: CLIENT_ID,
    audiences: [CLIENT_ID],
    algorithms: ['RS256'],
    clockToleranceSeconds: 30,
    getKey: keys.getKey,
    keyGeneration: () => keys.generation(),
    log: { warn: () => undefined, debug: () => undefined },
    clock,
  })
  return { provider, clock, keys, verifier }
}

/** Resolves once `condition` holds, checking on every turn of the event loop. */
async function until(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise((resolve) => setImmediate(resolve))
}

t.test('a fetch of the same set keeps the generation; a different set starts a new one', async (t) => {
  const { provider, clock, keys } = await setup(t)
  const first = keys.generation()
  clock.advance(MAX_AGE_MS)
  t.equal(keys.generation(), first, 'answered at once, the refresh runs in the background')
  await until(() => provider.jwksRequests === 2)
  await keys.prepare({ alg: 'RS256', kid: provider.currentKid })
  t.equal(keys.generation(), first, 'the same keys: the same generation')
  await provider.rotateKey()
  await keys.prepare({ alg: 'RS256', kid: provider.currentKid })
  t.equal(provider.jwksRequests, 3)
  t.equal(keys.generation(), first + 1, 'a new key: a new generation')
})

t.test('a cached token whose key is withdrawn is refused once the age refresh has run', async (t) => {
  const { provider, clock, keys, verifier } = await setup(t)
  const oldKid = provider.currentKid
  const token = await provider.signJwt({ exp: Math.floor(clock.now() / 1000) + 3600 })
  t.ok(await verifier.verify(token), 'verified and cached')
  const generation = keys.generation()

  await provider.rotateKey()
  provider.retireKey(oldKid)
  t.ok(await verifier.verify(token), 'the gateway has not seen the new set yet: still cached')
  t.equal(provider.jwksRequests, 1, 'no fetch while the set is fresh')

  clock.advance(MAX_AGE_MS)
  // Every request is served from the cache: using the token is what starts the refresh.
  t.ok(await verifier.verify(token), 'this use starts the refresh and does not wait for it')
  await until(() => keys.generation() === generation + 1)
  t.equal(await verifier.verify(token), undefined, 'its key is gone: refused')
  t.equal(verifier.cacheSizes.accepted, 0, 'and out of the cache')
})
