import type { Middleware } from '@kubernetes-models/traefik/traefik.io/v1alpha1/Middleware'
import t from 'tap'
import { FORWARD_AUTH_PATH } from '#src/contract/endpoints'
import { render } from '../fixtures/chart.ts'
import { manualClock } from '../fixtures/clock.ts'
import { type K8sObject, gatewayConfig } from '../fixtures/k8s-objects.ts'
import { startStack } from '../fixtures/stack.ts'
import { startTraefik, traefikBinary } from '../fixtures/traefik.ts'

// The chart's ForwardAuth Middleware, as rendered for session.store cookie, run by a real Traefik
// v3 (.ci/peers) in front of the oidc-provider stack: Traefik's file provider takes the same
// camelCase fields as the CRD's spec.forwardAuth (traefik/traefik
// docs/content/reference/routing-configuration/http/middlewares/forwardauth.md), so the rendered
// block is used as it is, its address pointed at the stack's gateway. The check refreshes an
// expired access token and answers 200 with the cookie store's new session in Set-Cookie; Traefik
// copies to the client's response only the cookies addAuthCookiesToResponse names. The provider
// rotates refresh tokens: the session outlives a second refresh only if the browser got the first.
// The chart is rendered with the stack's cookie settings (plain http, one host: no prefix, no
// Domain), so the names Traefik matches are the rendered ones, not rewritten.

const { version } = traefikBinary()

t.test(`Traefik ${version}: the rendered Middleware brings a refreshed cookie session to the browser`, async (t) => {
  const clock = manualClock()
  const stack = await startStack(t, { clock, provider: { accessTokenTtlSeconds: 3, rotateRefreshTokens: true }, upstreams: [{ name: 'app' }] })
  const { name, secure, domain, credentialsPath } = stack.config.cookies
  t.equal(stack.config.session.store, 'cookie', "the stack's sessions are in the cookie")
  const r = render(['quickstart-traefik.yaml'], { app: { host: '' }, config: { session: { store: 'cookie' }, cookies: { name, secure, credentialsPath } } })
  const rendered = gatewayConfig(r).config
  t.equal(rendered.session.store, 'cookie', 'the chart mounts session.store cookie')
  t.same(
    { name: rendered.cookies.name, secure: rendered.cookies.secure, domain: rendered.cookies.domain, credentialsPath: rendered.cookies.credentialsPath },
    { name, secure, domain, credentialsPath },
    "with the stack's cookie settings",
  )
  const spec = r.of<Middleware & K8sObject>('Middleware')[0]?.spec?.forwardAuth
  if (spec === undefined) throw new Error('the chart rendered no forwardAuth Middleware')
  t.equal(new URL(spec.address ?? '').pathname, FORWARD_AUTH_PATH, "the address is the gateway's forward-auth check")
  const edge = await startTraefik(t, { forwardAuth: { ...spec, address: `${stack.gw}${FORWARD_AUTH_PATH}` }, app: stack.upstream.url })

  const browser = await stack.signedIn('alice')
  const before = { session: browser.cookie(name)?.value, credentials: browser.cookie(`${name}_cred`)?.value }
  t.equal((await browser.fetch(`${edge.url}/page`)).status, 200, 'signed in: the check allows')
  clock.advance(3300)
  const refreshed = await browser.fetch(`${edge.url}/page`)
  t.equal(refreshed.status, 200, 'refreshed by the check')
  t.equal(stack.upstream.requests.at(-1)?.headers['x-auth-request-user'], 'alice', 'the application gets the identity')
  const names = refreshed.headers.getSetCookie().map((line) => line.slice(0, line.indexOf('=')))
  t.same(names.toSorted(), [name, `${name}_cred`], "the refreshed session's cookies reach the browser")
  t.not(browser.cookie(name)?.value, before.session, 'the browser holds the new session')
  t.not(browser.cookie(`${name}_cred`)?.value, before.credentials, 'and the rotated refresh token')
  // A check refreshes a session at most once in 30 seconds (docs/features/sessions.md); past
  // that, the browser's cookies are all the next check has.
  clock.advance(31_000)
  const later = await browser.fetch(`${edge.url}/page`, { headers: { accept: 'application/json' } })
  t.equal(later.status, 200, 'the session lives on through the next refresh')
})
