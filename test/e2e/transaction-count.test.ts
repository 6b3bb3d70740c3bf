import t from 'tap'
import { MAX_TRANSACTIONS } from '#src/session/cookies'
import { startStack } from '../fixtures/stack.ts'

// Each sign-in started sets a transaction cookie (up to about 3 KB with a long redirectAfter) for
// 10 minutes. Unbounded, a browser that starts many (a reloading tab, a script) sends them all to
// the callback, past the server's header limit (431): no sign-in completes in it for 10 minutes.
// The redirect endpoint keeps MAX_TRANSACTIONS per browser, the oldest dropped.

/** A valid redirectAfter near its 2048-character limit: the largest transaction. */
const LONG_TARGET = `/${'a'.repeat(2000)}`

t.test('20 sign-ins started in one browser: the last completes, and the browser holds at most MAX_TRANSACTIONS', async (t) => {
  const stack = await startStack(t)
  const browser = stack.browser()
  let last = ''
  for (let i = 0; i < 20; i++) {
    const start = await browser.fetch(`${stack.gw}/api/v1/openid/redirect?performRedirect=0&redirectAfter=${encodeURIComponent(LONG_TARGET)}`)
    t.equal(start.status, 200)
    last = ((await start.json()) as { value: string }).value
  }
  const held = browser.cookies().filter((c) => c.name.startsWith('ogw_tx_'))
  t.ok(held.length <= MAX_TRANSACTIONS, `${held.length} transaction cookies held`)
  t.ok(
    held.every((c) => c.name.length + c.value.length < 4000),
    'each under the 4096 bytes a browser keeps',
  )
  const done = await browser.signIn(last, 'alice', { gatewayOrigin: stack.gw })
  t.equal(done.status, 302, 'the callback of the last completes')
  t.equal(done.headers.get('location'), LONG_TARGET)
})

t.test(`${MAX_TRANSACTIONS} tabs: each completes, in any order`, async (t) => {
  const stack = await startStack(t)
  const browser = stack.browser()
  const urls: string[] = []
  for (let i = 0; i < MAX_TRANSACTIONS; i++) {
    const start = await browser.fetch(`${stack.gw}/api/v1/openid/redirect?performRedirect=0&redirectAfter=/tab-${i}`)
    urls.push(((await start.json()) as { value: string }).value)
  }
  for (const i of [1, 0, 2]) {
    const done = await browser.signIn(urls[i] as string, 'alice', { gatewayOrigin: stack.gw })
    t.equal(done.status, 302, `tab ${i} completes`)
    t.equal(done.headers.get('location'), `/tab-${i}`)
  }
})
