import t from 'tap'
import { setTimeout as sleep } from 'node:timers/promises'
import { randomUUID } from 'node:crypto'
import { BACKCHANNEL_LOGOUT_EVENT } from '#src/oidc/logout-token'
import { BACKCHANNEL_LOGOUT_PATH } from '#src/contract/endpoints'
import { rawRequest } from '../fixtures/http.ts'
import { CLIENT_ID } from '../fixtures/stack.ts'
import { startWorkers, signedIn, page, JSON_ACCEPT } from '../fixtures/workers.ts'

// server.workers: state every worker must share through the primary: back-channel logouts and
// the sign-in rate limit.

t.test('a back-channel logout received by one worker ends the session on every worker; its replay is refused', async (t) => {
  const gateway = await startWorkers(t)
  const cookie = await signedIn(gateway)
  const other = await signedIn(gateway, 'bob')
  t.equal((await page(gateway, cookie)).status, 200)
  const token = await gateway.provider.signJwt(
    { aud: CLIENT_ID, sub: 'alice', jti: randomUUID(), events: { [BACKCHANNEL_LOGOUT_EVENT]: {} } },
    { typ: 'logout+jwt' },
  )
  // Real time (worker processes take no injected clock): the logout comes in a later second than the sign-ins.
  await sleep(1000 - (Date.now() % 1000) + 10)
  // A connection each (rawRequest): cluster hands out connections, so a kept-alive one would stay on one worker.
  const logout = () =>
    rawRequest(gateway.gw, BACKCHANNEL_LOGOUT_PATH, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ logout_token: token }).toString(),
    })
  t.equal((await logout()).status, 200)
  const after = []
  for (let i = 0; i < 10; i++) after.push((await page(gateway, cookie, `/after${i}`)).status)
  t.same(after, Array(10).fill(401), 'refused by both workers at once')
  t.equal((await page(gateway, other)).status, 200, 'another user is left alone')
  const replays = []
  for (let i = 0; i < 4; i++) replays.push((await logout()).status)
  t.same(replays, Array(4).fill(400), 'the replayed token is refused by both workers')
})

t.test('the sign-in rate limit is one budget for all workers', async (t) => {
  const gateway = await startWorkers(t, { config: { rateLimit: { signIn: { max: 3, windowSeconds: 60 } } } })
  const statuses = []
  for (let i = 0; i < 5; i++) statuses.push((await rawRequest(gateway.gw, '/api/v1/openid/redirect', { headers: JSON_ACCEPT })).status)
  t.same(statuses, [302, 302, 302, 429, 429], 'three sign-ins, then 429 from whichever worker')
})
