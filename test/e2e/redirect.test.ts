import t from 'tap'
import { CLIENT_ID, startStack } from '../fixtures/stack.ts'
import { freePort } from '../fixtures/stack.ts'
import { buildStandaloneApp } from '#src/runtime/process-state'
import { parseConfig } from '#src/config/load'
import { stringify } from 'yaml'

t.test('scopes: none for a refresh token by default; offlineAccess or an explicit offline_access asks for one, with prompt=consent', async (t) => {
  const cases: Array<[name: string, provider: Record<string, unknown>, scope: string, prompt: string | null]> = [
    ['the defaults', { scopes: null, offlineAccess: null }, 'openid profile email', null],
    ['offlineAccess: true', { scopes: null, offlineAccess: true }, 'openid profile email offline_access', 'consent'],
    ['offline_access listed', { scopes: ['openid', 'offline_access'], offlineAccess: false }, 'openid offline_access', 'consent'],
    ['both', { scopes: ['openid', 'offline_access'], offlineAccess: true }, 'openid offline_access', 'consent'],
  ]
  const stack = await startStack(t)
  for (const [name, provider, scope, prompt] of cases) {
    stack.replicas[0]?.rewrite((config) => {
      const merged: Record<string, unknown> = { ...(config.provider as Record<string, unknown>), ...provider }
      for (const key of Object.keys(provider)) if (merged[key] === null) delete merged[key]
      return { ...config, provider: merged }
    })
    t.equal(await stack.live.reload('SIGHUP'), true, name)
    await stack.app.providersReady
    const res = await fetch(`${stack.gw}/api/v1/openid/redirect`, { redirect: 'manual' })
    const q = new URL(res.headers.get('location') ?? '').searchParams
    t.equal(q.get('scope'), scope, `${name}: scope`)
    t.equal(q.get('prompt'), prompt, `${name}: prompt (OpenID Connect Core 1.0 section 11)`)
  }
})

t.test('GET /api/v1/openid/redirect', async (t) => {
  const stack = await startStack(t)
  const endpoint = `${stack.gw}/api/v1/openid/redirect`

  t.test('302 to the authorization endpoint with code, PKCE S256, state and nonce', async (t) => {
    const res = await fetch(endpoint, { redirect: 'manual' })
    t.equal(res.status, 302)
    const location = new URL(res.headers.get('location') ?? '')
    t.equal(`${location.origin}${location.pathname}`, `${stack.provider?.issuer}/auth`)
    const q = location.searchParams
    t.equal(q.get('response_type'), 'code')
    t.equal(q.get('client_id'), CLIENT_ID)
    t.equal(q.get('redirect_uri'), `${stack.gw}/api/v1/openid/callback`)
    t.equal(q.get('scope'), 'openid profile email groups offline_access')
    t.equal(q.get('code_challenge_method'), 'S256')
    t.match(q.get('code_challenge'), /^[A-Za-z0-9_-]{43}$/)
    t.match(q.get('state'), /^[A-Za-z0-9_-]{43}$/)
    t.match(q.get('nonce'), /^[A-Za-z0-9_-]{43}$/)
    t.equal(q.get('prompt'), 'consent', 'offline_access needs prompt=consent (OIDC Core 11)')
    t.equal(res.headers.get('cache-control'), 'no-store')
  })

  t.test('each call has a fresh state, nonce and challenge', async (t) => {
    const a = new URL((await fetch(endpoint, { redirect: 'manual' })).headers.get('location') ?? '')
    const b = new URL((await fetch(endpoint, { redirect: 'manual' })).headers.get('location') ?? '')
    for (const name of ['state', 'nonce', 'code_challenge']) t.not(a.searchParams.get(name), b.searchParams.get(name), name)
  })

  t.test('the transaction cookie is encrypted, HttpOnly, SameSite=Lax, 10 minutes, callback path', async (t) => {
    const res = await fetch(endpoint, { redirect: 'manual' })
    const state = new URL(res.headers.get('location') ?? '').searchParams.get('state') ?? ''
    const cookies = res.headers.getSetCookie()
    t.equal(cookies.length, 2, 'the transaction and the browser binding')
    t.match(cookies[0], /^ogw_txb=[A-Za-z0-9_-]{22}\.[0-9a-z]{7}[A-Za-z0-9_-]{16};/, 'the binding: a secret and the transaction it lists')
    t.match(cookies[0], /; Path=\/;/)
    const cookie = cookies[1] ?? ''
    t.match(cookie, /^ogw_tx_[A-Za-z0-9_-]+=/)
    t.match(cookie, /; HttpOnly/i)
    t.match(cookie, /; SameSite=Lax/i)
    t.match(cookie, /; Max-Age=600/i)
    t.match(cookie, /; Path=\/api\/v1\/openid\/callback/i)
    const value = cookie.slice(cookie.indexOf('=') + 1, cookie.indexOf(';'))
    const nonce = new URL(res.headers.get('location') ?? '').searchParams.get('nonce') ?? ''
    t.notMatch(value, state.slice(16), 'the state is not readable in the cookie value')
    t.notMatch(Buffer.from(value.slice(9), 'base64url').toString('latin1'), nonce)
  })

  t.test('performRedirect=0 answers 200 with the same URI as a SingleValueResult', async (t) => {
    for (const value of ['0', 'false', 'FALSE', 'False']) {
      const res = await fetch(`${endpoint}?performRedirect=${value}`, { redirect: 'manual' })
      t.equal(res.status, 200, value)
      t.match(res.headers.get('content-type'), /^application\/json/)
      const body = (await res.json()) as { value: string }
      t.same(Object.keys(body), ['value'])
      const uri = new URL(body.value)
      t.equal(uri.searchParams.get('response_type'), 'code')
      t.equal(uri.searchParams.get('code_challenge_method'), 'S256')
      t.ok(
        res.headers.getSetCookie().some((c) => c.startsWith('ogw_tx_')),
        'the transaction cookie is still set',
      )
    }
  })

  t.test('performRedirect=1 and true (any case) redirect', async (t) => {
    for (const value of ['1', 'true', 'TRUE', 'tRuE']) {
      t.equal((await fetch(`${endpoint}?performRedirect=${value}`, { redirect: 'manual' })).status, 302, value)
    }
  })

  t.test('any other performRedirect is 400 bad_request, the empty one included', async (t) => {
    for (const value of ['', '2', 'yes', 'no', 'on', ' 1', 'truee', '%00']) {
      const res = await fetch(`${endpoint}?performRedirect=${value}`, { redirect: 'manual' })
      t.equal(res.status, 400, JSON.stringify(value))
      t.match(res.headers.get('content-type'), /^application\/problem\+json/)
      const body = (await res.json()) as Record<string, unknown>
      t.equal(body.code, 'bad_request')
      t.equal(body.status, 400)
      t.type(body.title, 'string')
      t.type(body.detail, 'string')
      t.type(body.type, 'string')
      t.same(res.headers.getSetCookie(), [], 'no transaction is started')
    }
  })

  t.test('a parameter given twice is 400', async (t) => {
    for (const query of ['performRedirect=1&performRedirect=1', 'redirectAfter=/a&redirectAfter=/b']) {
      const res = await fetch(`${endpoint}?${query}`, { redirect: 'manual' })
      t.equal(res.status, 400, query)
      t.equal(((await res.json()) as { code: string }).code, 'bad_request')
    }
  })

  t.test('redirectAfter: local paths and the public origin are accepted', async (t) => {
    for (const value of ['/', '/app/page?x=1#frag', `${stack.gw}/app`]) {
      const res = await fetch(`${endpoint}?redirectAfter=${encodeURIComponent(value)}`, { redirect: 'manual' })
      t.equal(res.status, 302, value)
    }
  })

  t.test('redirectAfter: open-redirect attempts are 400', async (t) => {
    const attacks = [
      '//evil.com',
      '/\\evil.com',
      '\\\\evil.com',
      'https:evil.com',
      'https://evil.com/',
      'javascript:alert(1)',
      'JaVaScRiPt:alert(1)',
      '/%2F/evil.com',
      '/%2f/evil.com',
      '/%5Cevil.com',
      '/%09/evil.com',
      '/\t/evil.com',
      '/\r\nLocation: https://evil.com',
      ' /app',
      '//EVIL.com',
      'HTTPS://evil.com',
      `${stack.gw}@evil.com`,
      'http://127.0.0.1.evil.com/',
      '/' + 'a'.repeat(2048),
      '',
    ]
    for (const value of attacks) {
      const res = await fetch(`${endpoint}?redirectAfter=${encodeURIComponent(value)}`, { redirect: 'manual' })
      t.equal(res.status, 400, JSON.stringify(value))
      t.equal(((await res.json()) as { code: string }).code, 'bad_request')
    }
  })
})

t.test('redirectAfter to an allowed host', async (t) => {
  const stack = await startStack(t, { config: { redirects: { allowedHosts: ['app.example.com', '.example.org'] } } })
  const endpoint = `${stack.gw}/api/v1/openid/redirect?redirectAfter=`
  for (const ok of ['https://app.example.com/x', 'https://docs.example.org/', 'https://example.org/']) {
    t.equal((await fetch(endpoint + encodeURIComponent(ok), { redirect: 'manual' })).status, 302, ok)
  }
  for (const bad of ['https://evil.app.example.com/', 'https://evilexample.org/', 'https://app.example.com.evil.com/']) {
    t.equal((await fetch(endpoint + encodeURIComponent(bad), { redirect: 'manual' })).status, 400, bad)
  }
  // A port is part of the origin: an entry without one covers the scheme's default port only, and
  // the refusal names the entry that would allow the port asked for.
  for (const [other, entry] of [
    ['https://docs.example.org:41103/', '.example.org:41103'],
    ['https://app.example.com:8443/x', 'app.example.com:8443'],
  ] as const) {
    const res = await fetch(endpoint + encodeURIComponent(other), { redirect: 'manual' })
    t.equal(res.status, 400, other)
    t.match(((await res.json()) as { detail: string }).detail, `redirects.allowedHosts needs ${entry}`, `${other}: the refusal names ${entry}`)
  }
  const plain = await fetch(endpoint + encodeURIComponent('https://evil.example.net:8443/'), { redirect: 'manual' })
  t.notMatch(((await plain.json()) as { detail: string }).detail, 'allowedHosts needs', 'a host no entry names: no hint')
  const withPort = await startStack(t, { config: { redirects: { allowedHosts: ['.example.org:41103'] } } })
  const allowed = `${withPort.gw}/api/v1/openid/redirect?redirectAfter=${encodeURIComponent('https://docs.example.org:41103/')}`
  t.equal((await fetch(allowed, { redirect: 'manual' })).status, 302, 'the .domain:port form allows that port on every subdomain')
})

t.test('503 not_ready while the provider metadata is not loaded', async (t) => {
  const deadPort = await freePort()
  const port = await freePort()
  const config = parseConfig(
    stringify({
      server: { host: '127.0.0.1', port, publicUrl: `http://127.0.0.1:${port}` },
      provider: { issuer: `http://127.0.0.1:${deadPort}`, clientId: 'c', clientSecret: 's', allowInsecureHttp: true },
      cookies: { secrets: ['x'.repeat(32)], secure: false },
      upstreams: [{ name: 'app', target: 'http://127.0.0.1:1' }],
      log: { level: 'silent' },
    }),
    {},
  )
  const app = await buildStandaloneApp(config)
  t.teardown(() => app.close())
  const res = await app.http.inject({ method: 'GET', url: '/api/v1/openid/redirect' })
  t.equal(res.statusCode, 503)
  t.equal(res.json().code, 'not_ready')
  t.equal(res.headers['retry-after'], '1')
  t.match(res.headers['content-type'], /^application\/problem\+json/)
})
