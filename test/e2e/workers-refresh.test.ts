import t from 'tap'
import { setTimeout as sleep } from 'node:timers/promises'
import { startWorkers, signedIn, page } from '../fixtures/workers.ts'

// server.workers: a refresh of one session on both workers at once redeems its token once.

t.test('concurrent refreshes of one session on both workers against a rotating provider: one redemption, every request passes', async (t) => {
  const gateway = await startWorkers(t, {
    provider: { accessTokenTtlSeconds: 2, refreshedAccessTokenTtlSeconds: 60, rotateRefreshTokens: true, refreshTokenPolicy: 'always' },
  })
  const redeemed: string[] = []
  let refused = 0
  gateway.provider.provider.on('grant.success', (ctx: { oidc?: { params?: Record<string, unknown> } }) => {
    if (ctx.oidc?.params?.grant_type === 'refresh_token') redeemed.push(String(ctx.oidc.params.refresh_token))
  })
  gateway.provider.provider.on('grant.error', (ctx: { oidc?: { params?: Record<string, unknown> } }) => {
    if (ctx.oidc?.params?.grant_type === 'refresh_token') refused++
  })
  const cookie = await signedIn(gateway)
  // Real time (worker processes take no injected clock): the 2 s access token expires. The
  // refreshed one lives 60 s, so that a slow machine cannot let it expire before the 16
  // requests are answered and make a second, legitimate, redemption.
  await sleep(2300)
  const results = await Promise.all(Array.from({ length: 16 }, (_, i) => page(gateway, cookie, `/r${i}`)))
  t.same(
    results.map((r) => r.status),
    Array(16).fill(200),
    'all 16 pass',
  )
  t.equal(redeemed.length, 1, 'one redemption for both workers')
  t.equal(refused, 0, 'the provider refused none (the grant was not revoked)')
})
