import t from 'tap'
import { startStack } from '../fixtures/stack.ts'
import { PROVIDER_ERROR_WORDS } from '#src/pages/error-page'
import { escapeHtml } from '#src/lib/html'

// A callback without a code speaks the provider's words (its `error` and `error_description`)
// only when it answers a sign-in this browser started: its `state` opens the browser's live
// transaction cookie. Anyone can link a victim to the callback with a text of their choosing
// ("call this number"); without the transaction the page says nothing of it and the JSON body
// carries neither value.

const NAVIGATE = { accept: 'text/html,application/xhtml+xml,*/*;q=0.8', 'sec-fetch-mode': 'navigate' }
const API = { accept: 'application/json' }
const PHISH = 'Your account is locked. Call +1 555 0100 to unlock it'

t.test('the callback echoes the provider only for a live transaction', async (t) => {
  const stack = await startStack(t)
  const callback = `${stack.gw}/api/v1/openid/callback`
  const forged = `?error=account_locked&error_description=${encodeURIComponent(PHISH)}`

  t.test('no transaction: the page says nothing the link carried', async (t) => {
    for (const query of [forged, `${forged}&state=guessed`]) {
      const res = await fetch(callback + query, { headers: NAVIGATE })
      t.equal(res.status, 400)
      const html = await res.text()
      t.match(html, 'Error 400 · code_missing')
      t.notMatch(html, 'Call +1 555', `${query}: no description`)
      t.notMatch(html, 'account_locked', `${query}: no error code`)
      t.notMatch(html, 'The identity provider answered')
    }
  })

  t.test('no transaction: the JSON body carries neither value', async (t) => {
    const res = await fetch(`${callback}${forged}&state=guessed`, { headers: API })
    t.equal(res.status, 400)
    const body = (await res.json()) as Record<string, unknown>
    t.equal(body.code, 'code_missing')
    t.notOk('error' in body, 'no error')
    t.notOk('error_description' in body, 'no error_description')
  })

  t.test("another browser's state opens nothing here", async (t) => {
    const other = stack.browser()
    const started = await other.fetch(`${stack.gw}/api/v1/openid/redirect?performRedirect=false`)
    const { value } = (await started.json()) as { value: string }
    const state = new URL(value).searchParams.get('state') ?? ''
    const res = await fetch(`${callback}${forged}&state=${state}`, { headers: API })
    const body = (await res.json()) as Record<string, unknown>
    t.notOk('error_description' in body)
  })

  t.test("the browser's own sign-in: the provider's words, escaped, page and JSON", async (t) => {
    const browser = stack.browser()
    const started = await browser.fetch(`${stack.gw}/api/v1/openid/redirect?performRedirect=false`)
    const { value } = (await started.json()) as { value: string }
    const state = new URL(value).searchParams.get('state') ?? ''
    t.ok(state)
    const query = `?error=invalid_scope&error_description=${encodeURIComponent('scope <b>x</b> unknown')}&state=${state}`
    const json = await browser.fetch(callback + query, { headers: API })
    t.equal(json.status, 400)
    t.match(await json.json(), { code: 'code_missing', error: 'invalid_scope', error_description: 'scope <b>x</b> unknown' })
    const page = await browser.fetch(callback + query, { headers: NAVIGATE })
    t.equal(page.status, 400)
    t.match(await page.text(), 'The identity provider answered <code>invalid_scope</code>: scope &#60;b&#62;x&#60;/b&#62; unknown.')
  })

  t.test("each of the provider's error codes (RFC 6749 4.1.2.1, OpenID Connect Core 3.1.2.6) in words a person understands", async (t) => {
    const browser = stack.browser()
    for (const [error, [heading, text]] of Object.entries(PROVIDER_ERROR_WORDS)) {
      const started = await browser.fetch(`${stack.gw}/api/v1/openid/redirect?performRedirect=false`)
      const { value } = (await started.json()) as { value: string }
      const state = new URL(value).searchParams.get('state') ?? ''
      const page = await browser.fetch(`${callback}?error=${error}&error_description=${encodeURIComponent('said <i>so</i>')}&state=${state}`, {
        headers: NAVIGATE,
      })
      t.equal(page.status, 400, `${error}: still code_missing's status`)
      const html = await page.text()
      t.match(html, `<h1>${escapeHtml(heading)}</h1>`, `${error}: the heading`)
      t.match(html, escapeHtml(text), `${error}: the explanation`)
      t.match(html, `The identity provider answered <code>${error}</code>: said &#60;i&#62;so&#60;/i&#62;.`, `${error}: the provider's words, escaped`)
    }
    t.match(PROVIDER_ERROR_WORDS.access_denied?.[0], /cancelled/, 'a cancel reads as one')
  })
})
