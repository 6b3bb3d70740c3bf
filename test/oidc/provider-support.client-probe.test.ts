import t from 'tap'
import { authorizationVerdict, type AuthorizationAnswer } from '#src/oidc/client-probe'
import { namesRedirectUri, providerKeyPath } from '#src/oidc/client'
import type { ProviderConfig } from '#src/options/types'
import { resolve } from '../fixtures/config/base.ts'

// `check --online` without PAR reads the authorization endpoint's answer to a prompt=none request
// (client-probe.ts): sent back to the redirect URI means registered (RFC 6749 4.1.2.1 forbids a
// redirect to an invalid one), a refusal that names the redirect URI means not, anything else
// does not tell. The providers' answers themselves are in test/cli.provider-settings.test.ts
// (oidc-provider), test/e2e/hydra.test.ts and test/e2e/keycloak.test.ts.

const provider = ((): ProviderConfig => {
  const only = resolve().providers[0]
  if (only === undefined) throw new Error('no provider')
  return only
})()
const URI = 'https://app.example.com/api/v1/openid/callback'

function verdict(answer: Partial<AuthorizationAnswer>): { state: string; said: string } {
  const v = authorizationVerdict(provider, URI, { status: 302, location: undefined, body: '', ...answer })
  return { state: !v.ok ? 'PROBLEM' : v.cannotTell === true ? 'WARNING' : 'ok', said: v.said }
}

t.test('sent back to the redirect URI: registered, whatever the answer carries', async (t) => {
  t.strictSame(verdict({ location: `${URI}?error=login_required&state=s` }), {
    state: 'ok',
    said: `${URI} is registered: the authorization endpoint sent a sign-in request with prompt=none back to it (error=login_required)`,
  })
  t.strictSame(verdict({ status: 303, location: `${URI}?code=c&state=s` }), {
    state: 'ok',
    said: `${URI} is registered: the authorization endpoint sent a sign-in request with prompt=none back to it`,
  })
})

t.test('a refusal that names the redirect URI is a problem: a 4xx page, or a redirect elsewhere with an error', async (t) => {
  // Keycloak's error page, and the words other providers' refusals are known by.
  for (const body of [
    '<p>Invalid parameter: redirect_uri</p>',
    'Error 400: redirect_uri_mismatch',
    'AADSTS50011: The redirect URI specified in the request does not match',
  ]) {
    t.strictSame(verdict({ status: 400, body }), {
      state: 'PROBLEM',
      said: `the authorization endpoint refused ${URI} (HTTP 400) and did not send the sign-in back to it: register it, exactly so, as a redirect URI of client ${provider.clientId}`,
    })
  }
  // Ory Hydra's error page, with fosite's hint.
  const hint = "The 'redirect_uri' parameter does not match any of the OAuth 2.0 Client's pre-registered redirect urls."
  const error = new URL('https://idp.example.com/oauth2/fallbacks/error')
  error.search = new URLSearchParams({ error: 'invalid_request', error_description: 'The request is malformed.', error_hint: hint }).toString()
  t.strictSame(verdict({ location: error.href }), {
    state: 'PROBLEM',
    said: `the authorization endpoint refused ${URI} (HTTP 302, invalid_request: ${hint}) and did not send the sign-in back to it: register it, exactly so, as a redirect URI of client ${provider.clientId}`,
  })
})

t.test('anything else does not tell', async (t) => {
  const cannot = (status: number, elsewhere: boolean): string =>
    `cannot tell: the authorization endpoint answered a sign-in request with prompt=none with HTTP ${status}${elsewhere ? ' elsewhere' : ''}, not naming the redirect URI; make sure ${URI} is registered`
  // A login page that ignores prompt=none, even one that carries the redirect URI in a form.
  t.strictSame(verdict({ status: 200, body: `<input type="hidden" name="redirect_uri" value="${URI}">` }), { state: 'WARNING', said: cannot(200, false) })
  // A redirect to a login page that carries the redirect URI, but no error.
  t.strictSame(verdict({ location: `https://idp.example.com/login?redirect_uri=${encodeURIComponent(URI)}` }), { state: 'WARNING', said: cannot(302, true) })
  // A refusal that names something else.
  t.strictSame(verdict({ status: 400, body: 'unknown client' }), { state: 'WARNING', said: cannot(400, false) })
  // Another path of the same origin is not the redirect URI.
  t.strictSame(verdict({ location: `${URI}/other?error=login_required` }), { state: 'WARNING', said: cannot(302, true) })
})

t.test('the words that name a redirect URI, and the keys a verdict names', async (t) => {
  for (const text of ['redirect_uri', 'Redirect URI', 'redirect-uri', 'redirect_url', 'REDIRECT URL']) t.ok(namesRedirectUri(text), text)
  for (const text of ['redirect', 'uri', 'post_logout_redirect', 'invalid_client']) t.notOk(namesRedirectUri(text), text)
  t.equal(providerKeyPath(provider, 'clientSecret'), 'provider.clientSecret')
  t.equal(providerKeyPath({ name: 'corp' }, 'clientKey'), 'providers[corp].clientKey')
})
