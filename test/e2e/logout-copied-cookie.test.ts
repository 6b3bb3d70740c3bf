import t from 'tap'
import { REFRESH_MS } from '#src/session/revocation'
import { eventually } from '../fixtures/poll.ts'
import { startRedis } from '../fixtures/redis.ts'
import { startStack, type Stack } from '../fixtures/stack.ts'

// The cookie store keeps the whole session in the browser: a logout clears the browser's cookies,
// and a copy of them taken before (a stolen or kept Cookie header) must not work afterwards
// (OWASP ASVS V3.3.1). Every logout lists the session by its id; the copy is refused with 401 by
// this replica at once and by another one sharing the list in Redis once it has read it again
// (polled for, bounded by its refresh interval). The user's other session is not ended with it.

const JSON_ACCEPT = { accept: 'application/json' }
/** How long replica B may take to see an entry of the shared list: its refresh interval, and a margin for a loaded machine. */
const LIST_REFRESH_BOUND_MS = REFRESH_MS + 4000

async function status(gw: string, cookie: string): Promise<number> {
  const res = await fetch(`${gw}/hello`, { headers: { ...JSON_ACCEPT, cookie } })
  await res.body?.cancel()
  return res.status
}

/** The gateway's cookies of a signed-in browser, as a copy an attacker would keep. */
async function copiedSession(stack: Stack): Promise<{ copy: string; logout: (how: 'delete' | 'form') => Promise<number> }> {
  const browser = await stack.signedIn('alice')
  const copy = browser.cookieHeader(`${stack.gw}/hello`)
  return {
    copy,
    async logout(how) {
      const res =
        how === 'delete'
          ? await browser.fetch(`${stack.gw}/api/v1/openid/logout`, { method: 'DELETE' })
          : await browser.fetch(`${stack.gw}/api/v1/openid/sign-out`, { method: 'POST', headers: { origin: stack.gw } })
      await res.body?.cancel()
      return res.status
    },
  }
}

for (const how of ['delete', 'form'] as const) {
  t.test(
    `cookie store in memory: a copied session cookie is refused after the ${how === 'delete' ? 'DELETE logout' : 'sign-out form'}; another session of the user is not`,
    async (t) => {
      const stack = await startStack(t)
      const victim = await copiedSession(stack)
      const other = await copiedSession(stack)
      t.equal(await status(stack.gw, victim.copy), 200, 'the copy works while signed in')
      t.equal(await victim.logout(how), how === 'delete' ? 200 : 303, 'logged out')
      t.equal(await status(stack.gw, victim.copy), 401, 'the replayed copy is refused')
      t.equal(await status(stack.gw, other.copy), 200, "the user's other session still works")
      t.equal(await stack.app.revocations?.size(), 1, 'one entry: that session')
    },
  )
}

t.test('cookie store, two replicas sharing the list in Redis: a copied cookie is refused by both after a logout on A', async (t) => {
  const redis = await startRedis(t)
  const stack = await startStack(t, { replicas: 2, config: { session: { redisUrl: redis.url } } })
  const [a, b] = stack.replicas.map((r) => r.gw) as [string, string]
  const victim = await copiedSession(stack)
  const other = await copiedSession(stack)
  t.equal(await status(b, victim.copy), 200, 'replica B reads the copy before the logout')
  t.equal(await victim.logout('delete'), 200, 'logged out on A')
  t.equal(await status(a, victim.copy), 401, 'replica A refuses the copy at once')
  t.equal(
    await eventually('replica B refuses the copy', async () => (await status(b, victim.copy)) === 401, LIST_REFRESH_BOUND_MS),
    true,
    'replica B refuses it once it has read the list again',
  )
  t.equal(await status(b, other.copy), 200, "the user's other session still works on B")
  t.equal(await stack.app.revocations?.size(), 1, 'one entry in the shared list')
})
