import t from 'tap'
import { Browser } from '../fixtures/browser.ts'
import { startImageStack } from '../fixtures/image.ts'

// A person signs in through the running image against the development provider, and the
// application behind it receives the request with the identity headers.

t.setTimeout(15 * 60_000)

t.test('a sign-in through the image reaches the upstream with the identity headers', async (t) => {
  const stack = await startImageStack(t)
  t.equal((await stack.ready()).status, 200, 'the gateway is ready')
  const browser = new Browser({ ca: stack.ca })
  const callback = await browser.signIn(`${stack.gw}/reports/2026`, 'alice')
  t.equal(callback.status, 302, 'the callback ends the sign-in')
  const page = await browser.follow(new URL(callback.headers.get('location') ?? '/', stack.gw))
  t.equal(page.response.status, 200, 'the page, through the gateway')
  const request = stack.upstream.requests.find((r) => r.url === '/reports/2026')
  t.ok(request, 'the upstream received the request')
  t.equal(request?.headers['x-forwarded-user'], 'alice', 'X-Forwarded-User')
  t.equal(request?.headers['x-forwarded-email'], 'alice@example.com', 'X-Forwarded-Email')
})
