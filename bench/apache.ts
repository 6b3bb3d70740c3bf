// Apache httpd with mod_auth_openidc in front of the same upstream: the established peer the
// gateway is measured against. Debian's apache2 and libapache2-mod-auth-openidc; BENCH_APACHE=install
// (as root) lets the bench install them, otherwise the rows run when they are present.
//
// For a comparison with one pinned Node process per server, Apache runs one server process
// (mpm_event, ServerLimit 1, enough threads for the 50 connections) under its parent, both pinned
// to the servers' core; the CPU of a row is that of both processes (all threads), and the peak
// RSS their summed high-water marks.

import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import type { Browser } from '../test/fixtures/browser.js'
import { treeStats } from './proc.js'
import type { Stats } from './server.js'

const HTTPD = '/usr/sbin/apache2'
const MODULES = '/usr/lib/apache2/modules'

export type ApacheMode = 'client-cookie' | 'shm'

export interface ApacheOptions {
  mode: ApacheMode
  port: number
  upstream: string
  issuer: string
  clientId: string
  clientSecret: string
  /** Pin Apache to the servers' core (taskset -c 0), as the Node servers are. */
  pinned: boolean
}

export interface Apache {
  origin: string
  stats(): Promise<Stats>
  stop(): Promise<void>
}

/** Whether Apache and mod_auth_openidc are installed, after installing them when asked to. */
export function apacheAvailable(): { available: boolean; why?: string } {
  const present = (): boolean => spawnSync(HTTPD, ['-v']).status === 0 && spawnSync('test', ['-f', `${MODULES}/mod_auth_openidc.so`]).status === 0
  if (present()) return { available: true }
  if (process.env.BENCH_APACHE !== 'install')
    return { available: false, why: 'apache2 and libapache2-mod-auth-openidc are not installed (BENCH_APACHE=install installs them as root)' }
  if (process.getuid?.() !== 0) return { available: false, why: 'BENCH_APACHE=install needs root' }
  const apt = spawnSync('sh', ['-c', 'apt-get update && apt-get install -y apache2 libapache2-mod-auth-openidc'], { stdio: ['ignore', 'ignore', 'inherit'] })
  if (apt.status !== 0 || !present()) return { available: false, why: 'installing apache2 and libapache2-mod-auth-openidc failed' }
  return { available: true }
}

/** The redirect URI to register at the provider for an Apache on `origin`. */
export function apacheRedirectUri(origin: string): string {
  return `${origin}/redirect_uri`
}

function config(dir: string, options: ApacheOptions): string {
  const origin = `http://127.0.0.1:${options.port}`
  const session =
    options.mode === 'client-cookie'
      ? 'OIDCSessionType client-cookie'
      : // The session in shared memory, the browser holds its id.
        'OIDCSessionType server-cache\nOIDCCacheType shm'
  return `ServerRoot ${dir}
PidFile ${dir}/httpd.pid
ErrorLog ${dir}/error.log
LogLevel warn
Listen 127.0.0.1:${options.port}
ServerName 127.0.0.1
LoadModule mpm_event_module ${MODULES}/mod_mpm_event.so
LoadModule authn_core_module ${MODULES}/mod_authn_core.so
LoadModule authz_core_module ${MODULES}/mod_authz_core.so
LoadModule authz_user_module ${MODULES}/mod_authz_user.so
LoadModule proxy_module ${MODULES}/mod_proxy.so
LoadModule proxy_http_module ${MODULES}/mod_proxy_http.so
LoadModule auth_openidc_module ${MODULES}/mod_auth_openidc.so
${process.getuid?.() === 0 ? 'User www-data\nGroup www-data' : ''}
StartServers 1
ServerLimit 1
MinSpareThreads 1
MaxSpareThreads 64
ThreadsPerChild 64
ThreadLimit 64
MaxRequestWorkers 64
MaxConnectionsPerChild 0
KeepAlive On
MaxKeepAliveRequests 0
KeepAliveTimeout 60
OIDCProviderMetadataURL ${options.issuer}/.well-known/openid-configuration
OIDCClientID ${options.clientId}
OIDCClientSecret ${options.clientSecret}
OIDCRedirectURI ${apacheRedirectUri(origin)}
OIDCCryptoPassphrase ${'bench-passphrase-'.repeat(3)}
OIDCScope "openid email profile"
OIDCPKCEMethod S256
OIDCProviderTokenEndpointAuth client_secret_basic
OIDCSessionInactivityTimeout 3600
${session}
ProxyPass /redirect_uri !
ProxyPass / ${options.upstream}/
<Location />
  AuthType openid-connect
  Require valid-user
</Location>
`
}

export async function startApache(options: ApacheOptions): Promise<Apache> {
  const dir = mkdtempSync(join(tmpdir(), `bench-apache-${options.mode}-`))
  writeFileSync(join(dir, 'httpd.conf'), config(dir, options))
  const args = ['-f', join(dir, 'httpd.conf'), '-DFOREGROUND']
  const child: ChildProcess = options.pinned
    ? spawn('taskset', ['-c', '0', HTTPD, ...args], { stdio: ['ignore', 'ignore', 'inherit'] })
    : spawn(HTTPD, args, { stdio: ['ignore', 'ignore', 'inherit'] })
  const origin = `http://127.0.0.1:${options.port}`
  const stop = async (): Promise<void> => {
    if (child.exitCode === null) {
      child.kill('SIGTERM')
      await Promise.race([new Promise((resolve) => child.once('exit', resolve)), sleep(5000)])
      if (child.exitCode === null) child.kill('SIGKILL')
    }
    rmSync(dir, { recursive: true, force: true })
  }
  // Apache answers once its server process is up (mod_auth_openidc's answer to an anonymous
  // request is not the point here); taskset execs it, so the pid is Apache's.
  for (let attempt = 0; ; attempt++) {
    const ready = await fetch(`${origin}/`, { redirect: 'manual' }).then(
      () => true,
      () => false,
    )
    if (ready) break
    if (child.exitCode !== null || attempt > 100) {
      const log = (() => {
        try {
          return readFileSync(join(dir, 'error.log'), 'utf8')
        } catch {
          return ''
        }
      })()
      await stop()
      throw new Error(`apache (${options.mode}) did not start: ${log.slice(-2000)}`)
    }
    await sleep(100)
  }
  const pid = child.pid as number
  return { origin, stats: async () => treeStats(pid), stop }
}

/**
 * Signs `username` in through Apache: the protected page redirects to the provider, the browser
 * signs in there and comes back to the redirect URI, which sets the session and sends it to the
 * page. Returns the Cookie header that makes the page answer 200 from the upstream.
 */
export async function signInApache(browser: Browser, origin: string, username: string): Promise<string> {
  await browser.signIn(`${origin}/page`, username)
  const page = await browser.fetch(`${origin}/page`, { headers: { accept: 'application/json' } })
  if (page.status !== 200) throw new Error(`sign-in through Apache failed: /page answered ${page.status}`)
  return browser.cookieHeader(origin)
}
