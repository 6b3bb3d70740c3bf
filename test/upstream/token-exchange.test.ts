// The exchanger's cache and single flight (upstream/token-exchange.ts) and the Bearer challenge's
// rendering (bearer-challenge.ts), with a stand-in provider client: the exchange itself is tested
// against oidc-provider in test/e2e/token-exchange.test.ts.

import t from 'tap'
import { GatewayError } from '#src/contract/errors'
import type { Identity } from '#src/contract/identity'
import type { ExchangedToken } from '#src/oidc/client'
import { Providers, type Provider } from '#src/oidc/providers'
import type { UpstreamConfig } from '#src/options/types'
import { bearerChallenge } from '#src/contract/bearer-challenge'
import { createTokenExchanger, reuseUntil } from '#src/upstream/token-exchange'
import { manualClock } from '../fixtures/clock.ts'
import { DEFAULT_CLAIM_MAPPING } from '#src/contract/claim-path'

const upstream = { name: 'orders', tokenExchange: { audience: 'orders-api' } } as UpstreamConfig
const identity = (accessToken: string): Identity => ({
  claims: { sub: 'alice' },
  accessToken,
  provider: 'default',
  issuer: 'https://idp.example.com',
  mapping: DEFAULT_CLAIM_MAPPING,
})

function setup(answer: (subject: string) => Promise<ExchangedToken>, maxEntries?: number) {
  const clock = manualClock()
  const calls: string[] = []
  const client = {
    exchangeToken: (subject: string) => {
      calls.push(subject)
      return answer(subject)
    },
  }
  const providers = new Providers([{ name: 'default', config: { issuer: 'https://idp.example.com' }, client, bearer: {} } as unknown as Provider])
  const exchanger = createTokenExchanger({ providers, clock, upstreams: [upstream], ...(maxEntries === undefined ? {} : { maxEntries }) })
  return { clock, calls, exchanger }
}

t.test('reuseUntil: 30 s before expiry, half the lifetime when shorter, 60 s without expires_in', async (t) => {
  const now = 1_000_000_000_000
  t.equal(reuseUntil({ accessToken: 'x', expiresAt: now / 1000 + 300 }, now), now + 270_000)
  t.equal(reuseUntil({ accessToken: 'x', expiresAt: now / 1000 + 40 }, now), now + 20_000)
  t.equal(reuseUntil({ accessToken: 'x', expiresAt: undefined }, now), now + 60_000)
})

t.test('one exchange per access token and upstream; concurrent callers share it', async (t) => {
  const { calls, exchanger, clock } = setup(async (s) => ({ accessToken: `ex-${s}`, expiresAt: Math.floor(Date.now() / 1000) + 300 }))
  const tokens = await Promise.all([1, 2, 3].map(() => exchanger.token(upstream, identity('u1'))))
  t.same(tokens, ['ex-u1', 'ex-u1', 'ex-u1'])
  t.same(calls, ['u1'])
  t.equal(await exchanger.token(upstream, identity('u2')), 'ex-u2', 'a refreshed session (new access token) exchanges afresh')
  t.same(calls, ['u1', 'u2'])
  exchanger.forgetToken('default', 'u1')
  await exchanger.token(upstream, identity('u1'))
  t.same(calls, ['u1', 'u2', 'u1'], "logout drops the session's exchanges")
  exchanger.forget()
  await exchanger.token(upstream, identity('u2'))
  t.equal(calls.length, 4, 'back-channel logout drops all')
  clock.advance(271_000)
  await exchanger.token(upstream, identity('u2'))
  t.equal(calls.length, 5, 'expired entries are exchanged again')
})

t.test("refusals are not cached; an unsafe token is the provider's fault", async (t) => {
  let refuse = true
  const { calls, exchanger } = setup(async () => {
    if (refuse) throw new GatewayError('token_exchange_refused', 'no')
    return { accessToken: 'bad\ntoken', expiresAt: undefined }
  })
  await t.rejects(exchanger.token(upstream, identity('u')), { code: 'token_exchange_refused' })
  await t.rejects(exchanger.token(upstream, identity('u')), { code: 'token_exchange_refused' })
  t.equal(calls.length, 2)
  refuse = false
  await t.rejects(exchanger.token(upstream, identity('u')), { code: 'provider_unavailable' })
})

t.test('the cache is bounded', async (t) => {
  const { calls, exchanger } = setup(async (s) => ({ accessToken: `ex-${s}`, expiresAt: undefined }), 2)
  for (const s of ['a', 'b', 'c', 'a']) await exchanger.token(upstream, identity(s))
  t.same(calls, ['a', 'b', 'c', 'a'], 'the oldest entry went first')
})

t.test('bearerChallenge', async (t) => {
  t.equal(bearerChallenge(), 'Bearer')
  t.equal(
    bearerChallenge({ error: 'invalid_token', resource_metadata: 'https://a.example/.well-known/oauth-protected-resource/x' }),
    'Bearer error="invalid_token", resource_metadata="https://a.example/.well-known/oauth-protected-resource/x"',
  )
  t.equal(bearerChallenge({ error: undefined, scope: 'a "b" \\c' }), 'Bearer scope="a \\"b\\" \\\\c"', 'quoted-string escapes; undefined left out')
})
