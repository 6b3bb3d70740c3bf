import t from 'tap'
import { rawRequest } from '../fixtures/http.ts'
import { startStack } from '../fixtures/stack.ts'

// After cookies.name (or cookies.secure, the __Host-/__Secure- prefix) changes, browsers keep
// sending the former cookies until they expire. The upstream must see none of them, a seal must
// not open under another name, and the browser is told to drop them (session/cookies.ts).

t.test('a restart with another cookies.name: the former session cookies never reach the upstream, nor open under the new name', async (t) => {
  const before = await startStack(t)
  const browser = await before.signedIn('alice')
  // Only the gateway's: the browser's jar also holds the provider's (cookies ignore the port).
  const former = browser
    .cookieHeader(`${before.gw}/page`)
    .split('; ')
    .filter((pair) => pair.startsWith('ogw'))
    .join('; ')
  t.match(former, /(^|; )ogw=/, 'signed in with the former name')
  const ogw = /(?:^|; )ogw=([^;]+)/.exec(former)?.[1] ?? ''

  // Same secrets (the stack's), another name: the gateway has never heard of `ogw`.
  const after = await startStack(t, { config: { cookies: { name: 'gw2' } } })
  const res = await rawRequest(after.gw, '/page', { headers: { accept: 'application/json', cookie: `${former}; app=1` } })
  t.equal(res.status, 401, 'the former session does not sign in')
  t.equal(after.upstream.requests.length, 0)

  const withPublic = await startStack(t, { config: { cookies: { name: 'gw2' } }, upstreams: [{ name: 'app', auth: 'optional' }] })
  const passed = await rawRequest(withPublic.gw, '/page', { headers: { accept: 'application/json', cookie: `${former}; app=1` } })
  t.equal(passed.status, 200, passed.body.slice(0, 200))
  t.equal(withPublic.upstream.requests.at(-1)?.headers.cookie, 'app=1', 'the former seals are stripped by their value')

  // The former seal presented under the new name: bound to `ogw`, it does not open as `gw2`.
  const replayed = await rawRequest(withPublic.gw, '/page', { headers: { accept: 'application/json', cookie: `gw2=${ogw}` } })
  t.equal(replayed.status, 200)
  t.equal(withPublic.upstream.requests.at(-1)?.headers['x-forwarded-user'], undefined, 'not signed in: the seal is bound to its name')
  t.equal(withPublic.upstream.requests.at(-1)?.headers.cookie, undefined, 'and it is stripped')
})

t.test('another prefix of the name (cookies.secure switched): stripped, and expired in the browser on first sight', async (t) => {
  const stack = await startStack(t, { upstreams: [{ name: 'app', auth: 'optional' }] })
  const res = await rawRequest(stack.gw, '/page', {
    headers: { accept: 'application/json', cookie: '__Host-ogw=opaque; __Secure-ogw_cred=opaque; ogw_cred_1=x; app=1' },
  })
  t.equal(res.status, 200)
  t.equal(stack.upstream.requests.at(-1)?.headers.cookie, 'app=1', 'every prefix, role and chunk of the name is stripped')
  const setCookie = [res.headers['set-cookie'] ?? []].flat()
  const expired = setCookie.filter((line) => /Max-Age=0/i.test(line)).map((line) => line.slice(0, line.indexOf('=')))
  t.ok(expired.includes('__Host-ogw'), '__Host-ogw expired')
  t.ok(expired.includes('__Secure-ogw_cred'), '__Secure-ogw_cred expired')
  t.ok(
    setCookie.filter((line) => line.startsWith('__Host-ogw=')).every((line) => /Secure/.test(line) && /Path=\//.test(line) && !/Domain=/i.test(line)),
    'as the __Host- prefix requires',
  )
  t.notOk(expired.includes('app'), "the application's cookie is left alone")
})
