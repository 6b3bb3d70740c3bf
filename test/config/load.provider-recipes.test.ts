// The provider recipes (config/providers/*.yaml) are configurations an operator copies: each must
// pass the gateway's own validation, carry the issuer shape its provider documents, and be
// described on its page of docs/providers/ (and every recipe named there must exist).

import { readdirSync, readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import YAML from 'yaml'
import { ConfigError, loadConfig } from '#src/config/load'
import { BACKCHANNEL_LOGOUT_PATH, CALLBACK_PATH, SIGN_OUT_PATH } from '#src/contract/endpoints'
import { COOKIE_SECRET } from '../fixtures/config/base.ts'

const ROOT = new URL('../../', import.meta.url)
const RECIPES = new URL('config/providers/', ROOT)
const ENV: Readonly<Record<string, string>> = { OIDC_CLIENT_SECRET: 'dummy-client-secret', COOKIE_SECRET }

// The recipes are loaded as an operator runs them: their ${VAR}s come from process.env.
const saved = Object.fromEntries(Object.keys(ENV).map((name) => [name, process.env[name]]))
Object.assign(process.env, ENV)
t.teardown(() => {
  for (const [name, value] of Object.entries(saved)) {
    if (value === undefined) delete process.env[name]
    else process.env[name] = value
  }
})

// The issuer each provider documents (docs/providers/README.md and each provider's page).
const ISSUER_SHAPES: Readonly<Record<string, RegExp>> = {
  // https://HOST/realms/REALM
  keycloak: /^https:\/\/[^/]+\/realms\/[^/]+$/,
  // the v2.0 endpoint of one tenant, never the v1 https://sts.windows.net/TENANT/
  'entra-id': /^https:\/\/login\.microsoftonline\.com\/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\/v2\.0$/,
  google: /^https:\/\/accounts\.google\.com$/,
  // a custom authorization server, https://ORG.okta.com/oauth2/AUTH_SERVER_ID
  okta: /^https:\/\/[^/]+\/oauth2\/[^/]+$/,
  // Auth0 writes iss with a trailing slash
  auth0: /^https:\/\/[^/]+\/$/,
  // whatever Dex's issuer setting says, over https
  dex: /^https:\/\/[^/]+(\/[^/]+)*$/,
  // Hydra's urls.self.issuer, written in iss as configured
  hydra: /^https:\/\/[^/]+(\/[^/]+)*$/,
  // github.com, or a GitHub Enterprise Server's base URL (provider.github)
  github: /^https:\/\/[^/]+$/,
}

// Google, Dex and GitHub have no end-session endpoint: a post-logout URI there would promise a redirect
// that never happens.
const NO_END_SESSION = new Set(['google', 'dex', 'github'])

// The only gateway URLs an operator registers at a provider.
const REGISTERED_PATHS = [CALLBACK_PATH, SIGN_OUT_PATH, BACKCHANNEL_LOGOUT_PATH]

const recipeFiles = readdirSync(RECIPES)
  .filter((name) => name.endsWith('.yaml'))
  .toSorted()
const recipeNames = recipeFiles.map((name) => name.replace(/\.yaml$/, ''))

const PAGES = new URL('docs/providers/', ROOT)

/** docs/providers/: the page of what every provider needs (README.md), and one page per provider. */
function providerPages(): Map<string, string> {
  return new Map(
    readdirSync(PAGES)
      .filter((name) => name.endsWith('.md'))
      .map((name) => [name.replace(/\.md$/, ''), readFileSync(new URL(name, PAGES), 'utf8')]),
  )
}

t.test('every provider has a recipe, and every recipe a documented issuer shape', async (t) => {
  t.strictSame(recipeNames, Object.keys(ISSUER_SHAPES).toSorted())
})

t.test('the provider pages name exactly the recipe files, each on its own page', async (t) => {
  const pages = providerPages()
  const text = [...pages.values()].join('\n')
  const named = [...new Set([...text.matchAll(/config\/providers\/([a-z0-9-]+)\.yaml/g)].map((match) => match[1]))].toSorted()
  t.strictSame(named, recipeNames)
  for (const name of recipeNames) t.ok(pages.get(name)?.includes(`config/providers/${name}.yaml`), `docs/providers/${name}.md describes its recipe`)
})

t.test('docs/providers/README.md tells what to register with the gateway\'s real paths', async (t) => {
  const page = providerPages().get('README') ?? ''
  t.not(page, '', 'docs/providers/README.md exists')
  for (const path of REGISTERED_PATHS) t.ok(page.includes(`\`<publicUrl>${path}\``), `docs/providers/README.md names <publicUrl>${path}`)
})

for (const name of recipeNames) {
  t.test(`${name}.yaml`, async (t) => {
    const path = fileURLToPath(new URL(`${name}.yaml`, RECIPES))
    const config = loadConfig(path)
    t.match(config.providers[0]!.issuer, ISSUER_SHAPES[name] ?? /^$/, 'issuer has the documented shape')
    t.equal(config.providers[0]!.allowInsecureHttp, false, 'no plain-http provider')
    t.match(config.server.publicUrl, /^https:\/\//, 'the public URL (and so every URI to register) is https')
    t.ok(config.providers[0]!.scopes.includes('openid'))

    // Secrets never written in a recipe: they come from the environment.
    const raw = YAML.parse(readFileSync(path, 'utf8')) as { provider: { clientSecret: unknown }; cookies: { secrets: unknown } }
    t.equal(raw.provider.clientSecret, '${OIDC_CLIENT_SECRET}')
    t.strictSame(raw.cookies.secrets, ['${COOKIE_SECRET}'])
    // Every gateway URL a recipe tells the operator to register is one the gateway serves.
    const text = readFileSync(path, 'utf8')
    const urls = [...text.matchAll(/https:\/\/[^\s,\]'"]+\/api\/v1\/openid\/[a-z-]+/g)].map((match) => match[0])
    t.ok(urls.some((url) => url === `${config.server.publicUrl}${CALLBACK_PATH}`), 'names the redirect URI')
    for (const url of urls) t.ok(REGISTERED_PATHS.some((p) => url === `${config.server.publicUrl}${p}`), `${url} is a gateway URL`)
    if (NO_END_SESSION.has(name)) t.equal(config.providers[0]!.postLogoutRedirectUri, undefined, 'no post-logout URI')
    else t.equal(config.providers[0]!.postLogoutRedirectUri, `${config.server.publicUrl}${SIGN_OUT_PATH}`, 'post-logout URI is the sign-out page')

    for (const missing of Object.keys(ENV)) {
      const env = { ...ENV, [missing]: undefined }
      t.throws(() => loadConfig(path, env), ConfigError, `refused without ${missing} in the environment`)
    }
  })
}

// Google does not list the offline_access scope (it gives refresh tokens for access_type=offline,
// which the gateway cannot send); asking for it brings no refresh token and adds prompt=consent.
t.test('the Google recipe does not ask for offline_access', async (t) => {
  const config = loadConfig(fileURLToPath(new URL('google.yaml', RECIPES)))
  t.notOk(config.providers[0]!.scopes.includes('offline_access'))
})
