import t from 'tap'
import { rawRequest } from '../fixtures/http.ts'
import { startStack } from '../fixtures/stack.ts'

// A page load on a host other than the public URL's (an upstream's match.hosts) is sent to sign
// in on the public origin, where the callback is: the transaction is sealed to a host-only
// browser binding (session/cookies.ts), so a sign-in begun on another host could never finish.
// It comes back to the page's absolute URL when the redirect endpoint accepts that host
// (redirects.allowedHosts), else to its path. On the public host the redirect stays relative.

const NAVIGATION = { accept: 'text/html', 'sec-fetch-mode': 'navigate' }
const REDIRECT = '/api/v1/openid/redirect'

t.test('a page load on another host signs in on the public origin', async (t) => {
  const stack = await startStack(t, {
    config: { redirects: { allowedHosts: ['app2.example.com'] } },
    upstreams: [{ name: 'site' }, { name: 'two', match: { pathPrefix: '/', hosts: ['app2.example.com', 'app3.example.com'] } }],
  })

  const own = await rawRequest(stack.gw, '/x?y=1', { headers: NAVIGATION })
  t.equal(own.status, 302)
  t.equal(own.headers.location, `${REDIRECT}?redirectAfter=${encodeURIComponent('/x?y=1')}`, 'the public host: relative, as before')

  const allowed = await rawRequest(stack.gw, '/x?y=1', { headers: { ...NAVIGATION, host: 'app2.example.com' } })
  t.equal(allowed.status, 302)
  t.equal(
    allowed.headers.location,
    `${stack.gw}${REDIRECT}?redirectAfter=${encodeURIComponent('http://app2.example.com/x?y=1')}`,
    'an allowed host: the public origin, back to the page itself',
  )

  const other = await rawRequest(stack.gw, '/x', { headers: { ...NAVIGATION, host: 'app3.example.com' } })
  t.equal(other.status, 302)
  t.equal(
    other.headers.location,
    `${stack.gw}${REDIRECT}?redirectAfter=${encodeURIComponent('/x')}`,
    'a host the redirect endpoint does not accept: its path only',
  )

  // The redirect endpoint accepts the absolute URL it was given: the sign-in starts there.
  const start = await fetch(allowed.headers.location as string, { redirect: 'manual' })
  t.equal(start.status, 302, 'the redirect endpoint takes the absolute redirectAfter')
  t.match(start.headers.get('location') ?? '', /response_type=code/)
})
