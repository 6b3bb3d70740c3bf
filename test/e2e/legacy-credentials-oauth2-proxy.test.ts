// The legacy credentials beside the real oauth2-proxy (v7.15.6, .ci/peers): the same provider, the
// same application (an echo upstream), oauth2-proxy with each legacy flag and the gateway with the
// key docs/migrating-from-oauth2-proxy.md maps it to. What the application receives must be the
// same credential for the same user, so that an application written for oauth2-proxy keeps
// working: the Basic user-id and password (`--pass-basic-auth --basic-auth-password`, with and
// without `--prefer-email-to-user`), the ID token as Bearer (`--pass-authorization-header`), the
// access token in X-Forwarded-Access-Token (`--pass-access-token`).

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import * as jose from 'jose'
import t from 'tap'
import { stringify } from 'yaml'
import { LiveGateway } from '#src/runtime/live'
import { Browser } from '../fixtures/browser.ts'
import { startOAuth2Proxy, type OAuth2Proxy } from '../fixtures/oauth2-proxy.ts'
import { startTestProvider } from '../fixtures/provider.ts'
import { freePort, reservePort } from '../fixtures/stack.ts'
import { startEchoUpstream, type RecordedRequest } from '../fixtures/upstream.ts'

t.setTimeout(110_000)

const CLIENT_SECRET = 'legacy-client-secret-0123456789'
// oauth2-proxy takes 16, 24 or 32 bytes, the gateway 32 or more: 32 suits both.
const COOKIE_SECRET = 'legacy-cookie-secret-32-bytes-ok'
const PASSWORD = 'shared: with the application'

/** Each scenario: oauth2-proxy's flags, and the gateway's upstream keys they map to. */
const SCENARIOS = {
  basic: { flags: ['--pass-basic-auth', `--basic-auth-password=${PASSWORD}`], keys: { forwardBasicAuth: { passwordFile: '' } } },
  email: {
    flags: ['--pass-basic-auth', `--basic-auth-password=${PASSWORD}`, '--prefer-email-to-user'],
    keys: { forwardBasicAuth: { user: 'email', passwordFile: '' } },
  },
  id: { flags: ['--pass-authorization-header'], keys: { forwardIdToken: true } },
  token: { flags: ['--pass-access-token'], keys: { forwardAccessTokenHeader: true } },
} as const
type Scenario = keyof typeof SCENARIOS
const NAMES = Object.keys(SCENARIOS) as Scenario[]

const upstream = await startEchoUpstream()
t.teardown(() => upstream.close())
const dir = mkdtempSync(join(tmpdir(), 'ogw-legacy-o2p-'))
t.teardown(() => rmSync(dir, { recursive: true, force: true }))
const passwordFile = join(dir, 'password')
writeFileSync(passwordFile, PASSWORD, { mode: 0o600 })

const reservation = await reservePort()
t.teardown(() => reservation.release())
const gw = `http://127.0.0.1:${reservation.port}`
const o2pPorts = Object.fromEntries(await Promise.all(NAMES.map(async (name) => [name, await freePort()] as const))) as Record<Scenario, number>
const o2pOrigin = (name: Scenario): string => `http://127.0.0.1:${o2pPorts[name]}`
const idp = await startTestProvider(t, {
  clients: [
    {
      clientId: 'app',
      clientSecret: CLIENT_SECRET,
      redirectUris: [`${gw}/api/v1/openid/callback`, ...NAMES.map((name) => `${o2pOrigin(name)}/oauth2/callback`)],
      postLogoutRedirectUris: [`${gw}/`],
    },
  ],
})

const configPath = join(dir, 'gateway.yaml')
writeFileSync(
  configPath,
  stringify({
    server: { host: '127.0.0.1', port: reservation.port, publicUrl: gw },
    provider: { issuer: idp.issuer, clientId: 'app', clientSecret: CLIENT_SECRET, allowInsecureHttp: true },
    cookies: { secrets: [COOKIE_SECRET], secure: false },
    upstreams: NAMES.map((name) => {
      const keys: Record<string, unknown> = structuredClone(SCENARIOS[name].keys)
      const basic = keys.forwardBasicAuth as Record<string, unknown> | undefined
      if (basic !== undefined) basic.passwordFile = passwordFile
      return { name, match: { pathPrefix: `/${name}` }, target: upstream.url, ...keys }
    }),
    log: { level: 'silent' },
  }),
)
const live = await LiveGateway.start({ path: configPath, env: {}, listening: reservation.server })
t.teardown(() => live.close(1000))
reservation.handOver()
await live.listen()
await live.app.providersReady

const proxies = new Map<Scenario, OAuth2Proxy>()
for (const name of NAMES) {
  const flags = (url: string): string[] => [
    '--provider=oidc',
    `--oidc-issuer-url=${idp.issuer}`,
    '--client-id=app',
    `--client-secret=${CLIENT_SECRET}`,
    `--cookie-secret=${COOKIE_SECRET}`,
    '--cookie-secure=false',
    `--redirect-url=${url}/oauth2/callback`,
    '--email-domain=*',
    `--upstream=${upstream.url}`,
    '--skip-provider-button',
    '--code-challenge-method=S256',
    ...SCENARIOS[name].flags,
  ]
  proxies.set(name, await startOAuth2Proxy(t, flags, o2pPorts[name]))
}

/** What the application receives when alice, signed in through `origin`, opens `path`. */
async function receivedThrough(origin: string, path: string): Promise<RecordedRequest> {
  const browser = new Browser()
  await browser.signIn(`${origin}${path}`, 'alice')
  const before = upstream.requests.length
  const res = await browser.fetch(`${origin}${path}`, { headers: { authorization: 'Basic Zm9yZ2VkOnNlbnQ=', 'x-forwarded-access-token': 'forged' } })
  if (res.status !== 200) throw new Error(`${origin}${path}: ${res.status}`)
  const request = upstream.requests.at(-1)
  if (request === undefined || upstream.requests.length === before) throw new Error(`${origin}${path} did not reach the application`)
  return request
}

const both = async (name: Scenario): Promise<{ o2p: RecordedRequest; gw: RecordedRequest }> => ({
  o2p: await receivedThrough(o2pOrigin(name), `/${name}/page`),
  gw: await receivedThrough(gw, `/${name}/page`),
})

const decodedBasic = (authorization: unknown): string => {
  const m = /^Basic ([A-Za-z0-9+/=]+)$/.exec(String(authorization))
  return m === null ? `not Basic: ${String(authorization)}` : Buffer.from(m[1] as string, 'base64').toString('utf8')
}

t.test('--pass-basic-auth and forwardBasicAuth: the same user-id and password', async (t) => {
  const { o2p, gw: at } = await both('basic')
  t.equal(decodedBasic(o2p.headers.authorization), `alice:${PASSWORD}`, 'oauth2-proxy: its user (sub) and the password')
  t.equal(decodedBasic(at.headers.authorization), decodedBasic(o2p.headers.authorization), 'the gateway: the same, the client’s own replaced')
})

t.test('--prefer-email-to-user and user: email', async (t) => {
  const { o2p, gw: at } = await both('email')
  t.equal(decodedBasic(o2p.headers.authorization), `alice@example.com:${PASSWORD}`)
  t.equal(decodedBasic(at.headers.authorization), decodedBasic(o2p.headers.authorization))
})

t.test('--pass-authorization-header and forwardIdToken: an ID token of the same user for the same client', async (t) => {
  const { o2p, gw: at } = await both('id')
  const idToken = (authorization: unknown): jose.JWTPayload => {
    const m = /^Bearer (\S+)$/.exec(String(authorization))
    if (m === null) throw new Error(`not Bearer: ${String(authorization)}`)
    return jose.decodeJwt(m[1] as string)
  }
  const [theirs, ours] = [idToken(o2p.headers.authorization), idToken(at.headers.authorization)]
  t.strictSame([theirs.iss, theirs.aud, theirs.sub], [idp.issuer, 'app', 'alice'], 'oauth2-proxy')
  t.strictSame([ours.iss, ours.aud, ours.sub], [theirs.iss, theirs.aud, theirs.sub], 'the gateway')
})

t.test('--pass-access-token and forwardAccessTokenHeader: X-Forwarded-Access-Token', async (t) => {
  const { o2p, gw: at } = await both('token')
  const discovery = (await (await fetch(`${idp.issuer}/.well-known/openid-configuration`)).json()) as { userinfo_endpoint: string }
  const owner = async (token: unknown): Promise<number | string> => {
    const res = await fetch(discovery.userinfo_endpoint, { headers: { authorization: `Bearer ${String(token)}` } })
    return res.status === 200 ? ((await res.json()) as { sub: string }).sub : res.status
  }
  t.equal(await owner(o2p.headers['x-forwarded-access-token']), 'alice', 'oauth2-proxy')
  t.equal(await owner(at.headers['x-forwarded-access-token']), 'alice', 'the gateway')
  t.equal(at.headers['x-auth-request-access-token'], at.headers['x-forwarded-access-token'], 'and under the name an edge copies')
})
