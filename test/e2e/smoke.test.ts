import t from 'tap'
import { startStack } from '../fixtures/stack.ts'

t.test('sign in, then a proxied request carries the identity', async (t) => {
  const stack = await startStack(t)
  const browser = stack.browser()
  const res = await browser.signIn(`${stack.gw}/api/v1/openid/redirect`, 'alice')
  t.equal(res.status, 200)
  const body = (await res.json()) as { value: string }
  t.type(body.value, 'string')
  const page = await browser.fetch(`${stack.gw}/hello`, { headers: { accept: 'application/json' } })
  t.equal(page.status, 200)
  const echo = (await page.json()) as { headers: Record<string, string> }
  t.equal(echo.headers['x-forwarded-user'], 'alice')
  t.equal(echo.headers['x-forwarded-email'], 'alice@example.com')
  t.equal(echo.headers['x-forwarded-groups'], 'admins,staff')
})
