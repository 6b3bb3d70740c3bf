// oauth2-proxy (v7.15.6, built by .ci/peers.sh from the Go module proxy) in front of the same
// upstream as the gateway, signed in at the same development provider: the peer most users of the
// gateway would come from. test/fixtures/oauth2-proxy.ts starts it (and fails naming
// `bash .ci/peers.sh oauth2-proxy` when the binary is missing); this module gives it the flags of
// a fair comparison, pins it to the servers' core, reads its CPU and memory from /proc, signs in
// through its real flow, and, for BENCH_PROFILE, records it with `perf`.
//
// The flags, as oauth2-proxy names them (pkg/apis/options in its source):
//  --provider=oidc --oidc-issuer-url --client-id --client-secret  the development provider, its discovery document
//  --redirect-url=<origin>/oauth2/callback                         registered at the provider like the gateway's callback
//  --code-challenge-method=S256                                    PKCE, which the development provider requires
//  --cookie-secret (32 bytes) --cookie-secure=false                plain http on loopback, as the gateway's `cookies.secure: false`
//  --session-store-type=cookie                                     the session in the cookie (its default), as the gateway's default store
//  --email-domain=*                                                any signed-in account, as the gateway's upstream without `allow`
//  --upstream=<upstream>/                                          every path to the same upstream
//  --set-xauthrequest=true                                         /oauth2/auth answers the user's identity in headers, as the gateway's check does
//  --request-logging=true|false                                    one line per request (its default), or none; to
//                                                                  /dev/null, where the gateway's lines go in the bench
// Everything else is oauth2-proxy's default: the scope `openid email profile` (the gateway's too),
// no cookie refresh, the user headers to the upstream (X-Forwarded-User, -Email, -Groups,
// -Preferred-Username), GOMAXPROCS as Go sets it (the CPUs the process may run on).

import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { startOAuth2Proxy } from '../test/fixtures/oauth2-proxy.js'
import { Browser } from '../test/fixtures/browser.js'
import { treeStats } from './proc.js'
import type { Stats } from './server.js'

/** 32 bytes: oauth2-proxy takes a secret of 16, 24 or 32 bytes for its AES cipher. */
const COOKIE_SECRET = 'bench-oauth2-proxy-cookie-secret'

export interface OAuth2ProxyOptions {
  port: number
  issuer: string
  clientId: string
  clientSecret: string
  upstream: string
  requestLogging: boolean
  /** Pin every thread to the servers' core (taskset -a -c 0), as the Node servers are. */
  pinned: boolean
}

export interface BenchOAuth2Proxy {
  origin: string
  pid: number
  /** The command line after the binary, for the results. */
  flags: string[]
  stats(): Promise<Stats>
}

/** The redirect URI to register at the provider for an oauth2-proxy on `origin`. */
export function oauth2ProxyRedirectUri(origin: string): string {
  return `${origin}/oauth2/callback`
}

export async function startBenchOAuth2Proxy(teardown: (fn: () => unknown) => void, options: OAuth2ProxyOptions): Promise<BenchOAuth2Proxy> {
  let flags: string[] = []
  const proxy = await startOAuth2Proxy(
    { teardown },
    (url) =>
      (flags = [
        '--provider=oidc',
        `--oidc-issuer-url=${options.issuer}`,
        `--client-id=${options.clientId}`,
        `--client-secret=${options.clientSecret}`,
        `--redirect-url=${oauth2ProxyRedirectUri(url)}`,
        '--code-challenge-method=S256',
        `--cookie-secret=${COOKIE_SECRET}`,
        '--cookie-secure=false',
        '--session-store-type=cookie',
        '--email-domain=*',
        `--upstream=${options.upstream}/`,
        '--set-xauthrequest=true',
        `--request-logging=${String(options.requestLogging)}`,
      ]),
    options.port,
    // Its request lines to /dev/null, where the gateway's go: read from a pipe by this process
    // they cost it some 60 µs a request more (a wake-up of the reader per line).
    true,
  )
  // The fixture keeps what stderr says, for a failed start's message; from here on it is dropped.
  proxy.child.stderr?.removeAllListeners('data')
  proxy.child.stderr?.resume()
  const pid = proxy.child.pid as number
  // It inherits the bench's affinity (the load generator's core) and so started with GOMAXPROCS
  // 1, which is what Go makes of one core; every thread is moved to the servers' core.
  if (options.pinned && spawnSync('taskset', ['-a', '-p', '-c', '0', String(pid)]).status !== 0) throw new Error('taskset could not pin oauth2-proxy')
  return { origin: proxy.url, pid, flags, stats: async () => treeStats(pid) }
}

/**
 * Signs `username` in through oauth2-proxy's own flow: /oauth2/start, the provider's forms,
 * /oauth2/callback, which sets the session cookie. Returns the Cookie header that makes a
 * proxied request answer 200 from the upstream.
 */
export async function signInOAuth2Proxy(origin: string, username: string): Promise<string> {
  const browser = new Browser()
  await browser.signIn(`${origin}/oauth2/start?rd=${encodeURIComponent('/page')}`, username)
  const page = await browser.fetch(`${origin}/page`, { headers: { accept: 'application/json' } })
  if (page.status !== 200) throw new Error(`sign-in through oauth2-proxy failed: /page answered ${page.status}`)
  return browser.cookieHeader(origin)
}

/** Whether `perf record` can sample a process here (a software clock: no hardware counters needed). */
export function perfAvailable(): boolean {
  return spawnSync('perf', ['record', '-e', 'cpu-clock', '-o', '/dev/null', '--', 'true'], { stdio: 'ignore' }).status === 0
}

/**
 * `perf record` of `pid` (all its threads, call graphs by frame pointer, which Go keeps) until
 * the returned function stops it and the data is in `file`.
 */
export function perfRecord(pid: number, file: string): () => Promise<void> {
  const perf: ChildProcess = spawn('perf', ['record', '-e', 'cpu-clock', '-F', '997', '-g', '-p', String(pid), '-o', file], {
    stdio: ['ignore', 'ignore', 'inherit'],
  })
  return () =>
    new Promise<void>((resolve) => {
      if (perf.exitCode !== null) return resolve()
      perf.once('exit', () => resolve())
      perf.kill('SIGINT')
    })
}
