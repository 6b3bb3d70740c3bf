// `npm run demo`: the whole thing on this machine with no setup. A development OpenID provider, a
// demo upstream that shows the headers it receives, and the gateway in front of it, all on
// loopback only. Configuration comes from config/demo.yaml, filled in from DEMO_* variables
// that are decided here (ports, random secrets).

import { randomBytes } from 'node:crypto'
import { createServer } from 'node:net'
import type { AddressInfo } from 'node:net'
import { dirname, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { buildStandaloneApp } from '../runtime/process-state.js'
import { ConfigError, loadConfig } from '../config/load.js'
import type { LogConfig } from '../options/types.js'
import { isDevProviderCookieName, startDevProvider } from './provider.js'
import { startDemoUpstream } from './upstream.js'
import { BACKCHANNEL_LOGOUT_PATH, CALLBACK_PATH, SIGN_OUT_PATH } from '../contract/endpoints.js'
import { staleBuildWarning } from './stale-build.js'
import { CookieCipher } from '../session/cipher.js'
import { GatewayCookies } from '../session/cookies.js'
import { systemClock } from '../lib/clock.js'

const HOST = '127.0.0.1'
const DEFAULT_GATEWAY_PORT = 8080
const CLIENT_ID = 'demo-gateway'
const LOG_LEVELS = new Set<LogConfig['level']>(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'])

// Same path from src/dev and build/dev.
const PACKAGE_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..')

/** A problem with the demo's own settings: reported in one line, no stack. */
class DemoError extends Error {}

function portFromEnv(name: string): number | undefined {
  const raw = process.env[name]
  if (raw === undefined || raw === '') return undefined
  const port = Number(raw)
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new DemoError(`${name} must be a port number (0-65535), got ${JSON.stringify(raw)}`)
  }
  return port
}

function tryListen(port: number): Promise<number | undefined> {
  return new Promise((resolvePort, reject) => {
    const server = createServer()
    server.once('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'EADDRINUSE' || err.code === 'EACCES') resolvePort(undefined)
      else reject(err)
    })
    server.listen(port, HOST, () => {
      const { port: bound } = server.address() as AddressInfo
      server.close(() => resolvePort(bound))
    })
  })
}

// The provider must know the gateway's callback URL before the gateway exists, so the gateway's
// port is settled first. An explicit DEMO_GATEWAY_PORT is honoured or refused; the default 8080
// quietly gives way to a free port.
async function pickGatewayPort(): Promise<number> {
  const wanted = portFromEnv('DEMO_GATEWAY_PORT')
  if (wanted !== undefined) {
    const port = await tryListen(wanted)
    if (port === undefined) throw new DemoError(`DEMO_GATEWAY_PORT=${wanted} is already in use`)
    return port
  }
  const port = (await tryListen(DEFAULT_GATEWAY_PORT)) ?? (await tryListen(0))
  if (port === undefined) throw new DemoError('no free port for the gateway')
  return port
}

function logLevel(): LogConfig['level'] {
  const raw = process.env.DEMO_LOG_LEVEL ?? 'warn'
  if (!LOG_LEVELS.has(raw as LogConfig['level'])) {
    throw new DemoError(`DEMO_LOG_LEVEL must be one of ${[...LOG_LEVELS].join(', ')}, got ${JSON.stringify(raw)}`)
  }
  return raw as LogConfig['level']
}

async function main(): Promise<void> {
  const stale = staleBuildWarning(PACKAGE_ROOT)
  if (stale !== undefined) process.stderr.write(`demo: ${stale}\n`)
  // DEMO_CONFIG lets you try the demo stack with your own variant of the file.
  const configPath = process.env.DEMO_CONFIG ?? resolve(PACKAGE_ROOT, 'config', 'demo.yaml')
  const closers: Array<() => Promise<unknown>> = []
  let stopping = false
  const stop = async (code: number): Promise<void> => {
    if (stopping) return
    stopping = true
    // Gateway first, then what it depends on.
    for (const close of closers.reverse()) {
      await close().catch(() => undefined)
    }
    process.exit(code)
  }
  process.once('SIGINT', () => void stop(0))
  process.once('SIGTERM', () => void stop(0))

  try {
    const level = logLevel()
    const upstream = await startDemoUpstream({ host: HOST, port: portFromEnv('DEMO_UPSTREAM_PORT') ?? 0 })
    closers.push(() => upstream.close())

    const gatewayPort = await pickGatewayPort()
    const publicUrl = `http://${HOST}:${gatewayPort}`
    const clientSecret = randomBytes(32).toString('base64url')

    const provider = await startDevProvider({
      host: HOST,
      port: portFromEnv('DEMO_PROVIDER_PORT') ?? 0,
      clients: [
        {
          clientId: CLIENT_ID,
          clientSecret,
          redirectUris: [publicUrl + CALLBACK_PATH],
          postLogoutRedirectUris: [publicUrl + SIGN_OUT_PATH],
          // Signing out at the provider (its own logout page) ends the gateway session too.
          backchannelLogoutUri: publicUrl + BACKCHANNEL_LOGOUT_PATH,
        },
      ],
      quiet: true,
      // Like Keycloak: a refresh token without offline_access, so no consent screen at sign-in
      // (config/demo.yaml asks for none) and the demo page's refresh button still works.
      refreshTokenPolicy: 'always',
    })
    closers.push(() => provider.close())

    const env: NodeJS.ProcessEnv = {
      ...process.env,
      DEMO_ISSUER: provider.issuer,
      DEMO_PUBLIC_URL: publicUrl,
      DEMO_GATEWAY_PORT: String(gatewayPort),
      DEMO_CLIENT_ID: CLIENT_ID,
      DEMO_CLIENT_SECRET: clientSecret,
      DEMO_COOKIE_SECRET: randomBytes(32).toString('base64url'),
      DEMO_UPSTREAM_URL: upstream.url,
      DEMO_LOG_LEVEL: level,
    }
    const config = loadConfig(configPath, env)
    // The console is for the instructions below; the gateway speaks up only about problems.
    config.log = { ...config.log, level }

    const app = await buildStandaloneApp(config)
    closers.push(() => app.close())
    // The demo page lists the cookies it receives: the provider's reach it too (same host), the
    // gateway's never do. The gateway's names are session/cookies.ts's, as the proxy strips them.
    const gatewayCookies = new GatewayCookies(config.cookies, new CookieCipher(config.cookies.secrets, systemClock))
    upstream.labelCookies({
      provider: { url: provider.issuer, owns: isDevProviderCookieName },
      gateway: { name: config.cookies.name, owns: gatewayCookies.isGatewayCookieName },
    })
    await app.http.listen({ host: HOST, port: gatewayPort })

    process.stdout.write(
      [
        '',
        'openid-gateway demo is running (loopback only).',
        '',
        `  Open            ${publicUrl}/`,
        '  Sign in with any username (try alice: groups admins, staff) and any password.',
        '',
        '  What you will see: the gateway sends you to the development OpenID provider, then proxies',
        '  you to a demo application that knows nothing of OpenID and shows the identity headers it',
        '  received (X-Forwarded-User, -Email, -Groups, -Preferred-Username), plus buttons to refresh',
        `  the token and to log out. ${publicUrl}/public/ needs no sign-in.`,
        "  It lists the cookies it receives and whose each is: the provider's arrive too (same host),",
        "  the gateway's never do (it removes them).",
        `  Sign out without script: ${publicUrl}${SIGN_OUT_PATH}`,
        `  Sign out at the provider (${provider.issuer}/session/end) and its back-channel logout to`,
        `  ${publicUrl}${BACKCHANNEL_LOGOUT_PATH} ends the gateway session too.`,
        '',
        `  Gateway         ${publicUrl}`,
        `  OpenID provider ${provider.issuer}   (client ${CLIENT_ID})`,
        `  Demo upstream   ${upstream.url}`,
        `  Gateway logs    level ${level} (set DEMO_LOG_LEVEL=info for one line per request)`,
        '',
        'Ctrl-C stops everything.',
        '',
      ].join('\n'),
    )
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`demo: ${configPath} is invalid:\n${err.issues.map((i) => `  ${i}`).join('\n')}\n`)
    } else if (err instanceof DemoError) {
      process.stderr.write(`demo: ${err.message}\n`)
    } else {
      process.stderr.write(`demo: failed to start: ${err instanceof Error ? err.message : String(err)}\n`)
    }
    // Exit code 2 on an invalid configuration, like the gateway itself.
    await stop(err instanceof ConfigError ? 2 : 1)
  }
}

void main()
