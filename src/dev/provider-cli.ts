// `npm run provider`: the development OpenID provider on its own, to try a gateway configuration
// of your own against it. It prints what the configuration needs (issuer, client id and secret,
// the redirect URIs it accepts) and who can sign in. Loopback only by default; never production.

import { randomBytes } from 'node:crypto'
import { dirname, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { CALLBACK_PATH, SIGN_OUT_PATH } from '../contract/endpoints.js'
import { startDevProvider } from './provider.js'
import { staleBuildWarning } from './stale-build.js'

const USAGE = `usage: npm run provider -- [--port 9000] [--host 127.0.0.1] [--client-id gateway]
         [--client-secret SECRET] [--gateway-url http://127.0.0.1:8080]
         [--redirect-uri URI]... [--post-logout-redirect-uri URI]... [--acr-values pwd,mfa]`

const DEFAULT_PORT = 9000

class UsageError extends Error {}

interface Settings {
  host: string
  port: number
  clientId: string
  clientSecret: string
  redirectUris: string[]
  postLogoutRedirectUris: string[]
  /** Step-up: the acr values the login grants, weakest first (DevProviderOptions.acrValues). */
  acrValues?: string[]
}

function settings(argv: string[]): Settings {
  const { values } = parseArgs({
    args: argv,
    options: {
      host: { type: 'string', default: '127.0.0.1' },
      port: { type: 'string', default: String(DEFAULT_PORT) },
      'client-id': { type: 'string', default: 'gateway' },
      'client-secret': { type: 'string' },
      // The gateway's public URL: the accepted redirect URIs derive from it.
      'gateway-url': { type: 'string', default: 'http://127.0.0.1:8080' },
      'redirect-uri': { type: 'string', multiple: true },
      'post-logout-redirect-uri': { type: 'string', multiple: true },
      'acr-values': { type: 'string' },
    },
  })
  const acrValues = values['acr-values']
    ?.split(',')
    .map((v) => v.trim())
    .filter((v) => v !== '')
  if (acrValues !== undefined && acrValues.length === 0) throw new UsageError('--acr-values must name at least one value, e.g. pwd,mfa')
  const port = Number(values.port)
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new UsageError(`--port must be a port number (0-65535), got ${JSON.stringify(values.port)}`)
  const gateway = values['gateway-url'].replace(/\/+$/, '')
  if (!/^https?:\/\/[^/]+$/.test(gateway))
    throw new UsageError(`--gateway-url must be an origin such as http://127.0.0.1:8080, got ${JSON.stringify(values['gateway-url'])}`)
  return {
    host: values.host,
    port,
    clientId: values['client-id'],
    clientSecret: values['client-secret'] ?? randomBytes(24).toString('base64url'),
    redirectUris: values['redirect-uri'] ?? [gateway + CALLBACK_PATH],
    postLogoutRedirectUris: values['post-logout-redirect-uri'] ?? [`${gateway}/`, gateway + SIGN_OUT_PATH],
    ...(acrValues === undefined ? {} : { acrValues }),
  }
}

async function main(): Promise<void> {
  let s: Settings
  try {
    s = settings(process.argv.slice(2))
  } catch (err) {
    process.stderr.write(`provider: ${err instanceof Error ? err.message : String(err)}\n${USAGE}\n`)
    process.exit(2)
  }
  // Same path from src/dev and build/dev.
  const stale = staleBuildWarning(resolve(dirname(fileURLToPath(import.meta.url)), '..', '..'))
  if (stale !== undefined) process.stderr.write(`provider: ${stale}\n`)
  const provider = await startDevProvider({
    host: s.host,
    port: s.port,
    clients: [{ clientId: s.clientId, clientSecret: s.clientSecret, redirectUris: s.redirectUris, postLogoutRedirectUris: s.postLogoutRedirectUris }],
    quiet: true,
    ...(s.acrValues === undefined ? {} : { acrValues: s.acrValues }),
  })
  const stop = (): void => void provider.close().then(() => process.exit(0))
  process.once('SIGINT', stop)
  process.once('SIGTERM', stop)

  process.stdout.write(
    [
      '',
      'Development OpenID provider is running. For trying things out only: any username signs in.',
      '',
      `  Issuer            ${provider.issuer}`,
      `  Discovery         ${provider.issuer}/.well-known/openid-configuration`,
      `  Client ID         ${s.clientId}`,
      `  Client secret     ${s.clientSecret}`,
      `  Redirect URIs     ${s.redirectUris.join(', ')}`,
      `  Post-logout URIs  ${s.postLogoutRedirectUris.join(', ')}`,
      '  Users             any username, any password: alice (groups admins, staff), bob (staff),',
      '                    anyone else (no groups); email <username>@example.com, verified',
      '',
      'In your gateway configuration:',
      '',
      '  provider:',
      `    issuer: ${provider.issuer}`,
      `    clientId: ${s.clientId}`,
      `    clientSecret: ${s.clientSecret}`,
      '    allowInsecureHttp: true        # plain http: development only',
      '    scopes: [openid, profile, email, groups]',
      '    # offlineAccess: true           # a refresh token, at the price of a consent screen',
      '',
      'Ctrl-C stops it.',
      '',
    ].join('\n'),
  )
}

main().catch((err: unknown) => {
  process.stderr.write(`provider: failed to start: ${err instanceof Error ? err.message : String(err)}\n`)
  process.exit(1)
})
