import t from 'tap'
import { startStack } from '../fixtures/stack.ts'

t.test('secure cookies carry the __Host- / __Secure- prefixes and the configured SameSite', async (t) => {
  const stack = await startStack(t, { config: { cookies: { secure: true, sameSite: 'strict' } } })
  const browser = stack.browser()
  const start = await browser.fetch(`${stack.gw}/api/v1/openid/redirect`)
  const tx = start.headers.getSetCookie().find((c) => c.startsWith('__Secure-ogw_tx_')) ?? ''
  t.match(tx, /; Secure/)
  t.match(tx, /; SameSite=Strict/)
  const binding = start.headers.getSetCookie().find((c) => c.startsWith('__Host-ogw_txb=')) ?? ''
  t.match(binding, /; Path=\/;/, 'the binding of the transactions: __Host-, Path=/')
  t.match(binding, /; Secure/)
  t.match(binding, /; SameSite=None/, 'back with a form_post callback too')
  t.notMatch(binding, /; Domain=/i, 'host-only')

  const res = await browser.signIn(`${stack.gw}/api/v1/openid/redirect`, 'alice')
  t.equal(res.status, 200)
  const set = res.headers.getSetCookie()
  const session = set.find((c) => c.startsWith('__Host-ogw='))
  const credentials = set.find((c) => c.startsWith('__Host-ogw_cred='))
  t.ok(session, '__Host-ogw')
  t.ok(credentials, '__Host-ogw_cred: it travels on every path, so it is bound to the origin too')
  for (const cookie of [session, credentials]) {
    t.match(cookie, /; Secure/)
    t.match(cookie, /; HttpOnly/)
    t.match(cookie, /; SameSite=Strict/)
    t.notMatch(cookie, /; Domain=/i, 'host-only')
  }
  t.match(session, /; Path=\/;/)
  t.match(credentials, /; Path=\/;/)

  const page = await browser.fetch(`${stack.gw}/x`, { headers: { accept: 'application/json' } })
  t.equal(page.status, 200)
  t.equal(stack.upstream.requests.at(-1)?.headers['x-forwarded-user'], 'alice')
  t.notMatch(stack.upstream.requests.at(-1)?.headers.cookie ?? '', /ogw/, 'prefixed cookies are stripped too')

  const logout = await browser.fetch(`${stack.gw}/api/v1/openid/logout`, { method: 'DELETE' })
  t.equal(logout.status, 200)
  const cleared = logout.headers.getSetCookie()
  t.ok(
    cleared.some((c) => c.startsWith('__Host-ogw=;') && /Max-Age=0/.test(c) && /; Secure/.test(c)),
    'cleared with the same attributes',
  )
})
