// npm run bench: what a request costs the gateway, next to a bare @fastify/http-proxy and the
// upstream itself. Everything runs on loopback: the real dev oidc-provider (sign-in through the
// real flow), a fast upstream, each configuration of the gateway and the baseline in a process of
// its own (pinned to core 0 when taskset works), and autocannon in this process (core 1): 50
// connections, a warm-up, then alternating rounds, medians. The figure that survives a noisy
// machine is the server's own CPU time per request (user + system, from process.cpuUsage in that
// process). Prints a markdown table and writes it with the raw figures under bench/results/.
// The Envoy ext_authz gRPC row cannot be driven by autocannon: a closed loop of gRPC calls on one
// HTTP/2 connection (grpc-load.ts), as many in flight as autocannon has connections, takes its place.
// oauth2-proxy (oauth2-proxy.ts) runs beside the gateway: its signed-in request and its
// /oauth2/auth check, each row of the gateway it answers for measured next to it.

import { execFileSync, fork, spawn, spawnSync } from 'node:child_process'
import { generateKeyPairSync } from 'node:crypto'
import { mkdirSync, mkdtempSync, renameSync, writeFileSync } from 'node:fs'
import { createServer as createHttpServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { cpus, tmpdir } from 'node:os'
import { join } from 'node:path'
import type { MethodDefinition } from '@grpc/grpc-js'
import autocannon from 'autocannon'
import { stringify } from 'yaml'
import { startDevProvider } from '#src/dev/provider'
import { Browser } from '../test/fixtures/browser.js'
import { EXT_AUTHZ_PATH } from '../test/fixtures/envoy.js'
import { loadEnvoyGrpcServices } from '#src/checks/envoy-grpc/protos'
import { checkRequest, type DecodedCheckResponse } from '../test/fixtures/ext-authz-grpc.js'
import { startRedis } from '../test/fixtures/redis.js'
import { startCluster } from '../test/fixtures/redis-cluster.js'
import { startSentinel } from '../test/fixtures/redis-sentinel.js'
import { CLIENT_ID, CLIENT_SECRET, COOKIE_SECRET, freePorts } from '../test/fixtures/stack.js'
import { apacheAvailable, apacheRedirectUri, signInApache, startApache, type ApacheMode } from './apache.js'
import { grpcLoad, h2loadAvailable, h2loadUnary, rawUnaryCaller } from './grpc-load.js'
import { perfAvailable, perfRecord, signInOAuth2Proxy, startBenchOAuth2Proxy, oauth2ProxyRedirectUri, type BenchOAuth2Proxy } from './oauth2-proxy.js'
import { othersShare, readHost, tcpActiveOpens, treeStats } from './proc.js'
import { peerVersion } from '../test/fixtures/peers.js'
import type { Listening, ServerSpec, Stats } from './server.js'

const CONNECTIONS = 50
const WARMUP_SECONDS = Number(process.env.BENCH_WARMUP ?? 3)
const ROUND_SECONDS = Number(process.env.BENCH_SECONDS ?? 5)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3)
const SERVER = new URL('./server.js', import.meta.url).pathname
const CLI = new URL('../src/cli.js', import.meta.url).pathname
/**
 * BENCH_PROFILE=1: each Node server profiles the measured rounds (not its start, the sign-ins or
 * the warm-up) and writes bench/profiles/<server>.cpuprofile with the requests it answered in
 * them, so that profile-summary.ts gives microseconds per request.
 */
/**
 * BENCH_PROFILE=perf: every server, Node's too, recorded by `perf record` instead (the kernel's
 * share of a request, which V8's profiler counts inside the native function that made the system
 * call, shown the same way for a Node server and for oauth2-proxy); read with perf-summary.js.
 */
const PERF_ALL = process.env.BENCH_PROFILE === 'perf'
const PROFILE = process.env.BENCH_PROFILE === '1' || PERF_ALL
/**
 * BENCH_SOAK=seconds: after the table, the cookie-session row for that long, the gateway's
 * resident memory sampled every SOAK_SAMPLE_SECONDS: a leak shows as a rising series.
 */
const SOAK_SECONDS = Number(process.env.BENCH_SOAK ?? 0)
const SOAK_SAMPLE_SECONDS = 30
const MiB = 1024 * 1024
/**
 * BENCH_ROWS=text[,text...]: only the rows whose name contains one of them (`=name`: whose name is
 * exactly that, e.g. `=gateway, cookie session` alone, for a profile). The upstream's own row
 * (the host's floor: what answering one request costs any Node server here) and the two baselines
 * always run, so that every result says how fast the host was.
 */
// Row names hold ", ": the list separates at a comma not followed by a space.
const ONLY = process.env.BENCH_ROWS?.split(/,(?! )/)
const selected = (name: string): boolean => ONLY === undefined || ONLY.some((text) => (text.startsWith('=') ? name === text.slice(1) : name.includes(text)))
const GRPC_ROW = 'ext_authz gRPC check (Envoy)'
/** The host's floor: a plain node:http server answering from memory (the upstream itself). */
const FLOOR_ROW = 'upstream direct: plain node:http answering from memory (the floor)'
/** The framework's own share of a check's cost: Fastify answering one route from memory. */
const FASTIFY_ROW = 'Fastify, one route answering from memory (no proxy, no logger)'
const BARE_ROW = 'bare @fastify/http-proxy (baseline)'
const BARE_WARN_ROW = 'bare @fastify/http-proxy, Fastify logger at warn'
/** The baseline with what the gateway also does per request: one access line. */
const BARE_LINE_ROW = 'bare @fastify/http-proxy + one pino access line per request'
/** oauth2-proxy's rows, each beside the gateway's rows that do what it does. */
const O2P_ROW = 'oauth2-proxy, cookie session'
const O2P_QUIET_ROW = 'oauth2-proxy, cookie session, request logging off'
const O2P_AUTH_ROW = 'oauth2-proxy /oauth2/auth (ingress-nginx auth_request)'
const O2P_AUTH_QUIET_ROW = 'oauth2-proxy /oauth2/auth, request logging off'
/** Rows every run measures, BENCH_ROWS or not: they say how fast the host was. */
const ALWAYS = new Set([FLOOR_ROW, FASTIFY_ROW, BARE_ROW, BARE_WARN_ROW, BARE_LINE_ROW])
/**
 * BENCH_NODE_OPTIONS="--flag ...": Node and V8 options for the gateway's processes only (not the
 * upstream, the baseline or the load generator), as a container's NODE_OPTIONS would set them:
 * e.g. `--max-semi-space-size=2`, to measure what a heap limit costs and saves.
 */
const GATEWAY_NODE_OPTIONS = process.env.BENCH_NODE_OPTIONS?.split(/\s+/).filter(Boolean) ?? []
/**
 * BENCH_RATE=<requests per second>: every HTTP row is offered that many requests per second in
 * all (autocannon's overallRate) instead of as many as the server answers. A server's CPU per
 * request depends on its rate as well as its code: on loopback the write that answers a request
 * also wakes the client when it was waiting, which costs more the more idle the client is. Rows at
 * one rate compare code with code; a rate higher than a row can serve leaves it saturated.
 */
const RATE = process.env.BENCH_RATE === undefined ? undefined : Number(process.env.BENCH_RATE)
/**
 * BENCH_PAIRED=1: in every round each row is measured right after its own floor, bare proxy and
 * bare proxy with the access line, and its ratios divide by those, seconds apart, rather than by
 * the baselines' one measure of the round, which on a shared host may be a minute away and have
 * met another machine. Four times the rows' time: meant for a few rows (BENCH_ROWS) and short rounds.
 */
const PAIRED = process.env.BENCH_PAIRED === '1'

const H2LOAD = h2loadAvailable()

const pinned = cpus().length >= 2 && spawnSync('taskset', ['-p', '-c', '1', String(process.pid)]).status === 0

interface Server {
  name: string
  origin: string
  /** `host:port` of the ext_authz gRPC service, when the spec asked for one. */
  grpcAddress?: string
  stats(): Promise<Stats>
  /** BENCH_PROFILE: starts the server's CPU profile, or stops it and writes it to `file`. */
  profile?(command: 'start' | { file: string }): Promise<void>
  /** What writes the profile: V8's profiler (a .cpuprofile) or `perf record` (a .perf.data). */
  profiler?: 'v8' | 'perf'
}

const teardown: Array<() => unknown> = []

async function startServer(name: string, spec: ServerSpec): Promise<Server> {
  // --perf-basic-prof: V8 writes /tmp/perf-<pid>.map, which names JavaScript functions in perf's samples.
  const options = [...(spec.kind === 'gateway' ? GATEWAY_NODE_OPTIONS : []), ...(PERF_ALL ? ['--perf-basic-prof'] : [])]
  const child = fork(SERVER, [JSON.stringify(spec)], {
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    // The servers share core 0; the load generator has core 1 to itself.
    ...(pinned ? { execPath: 'taskset', execArgv: ['-c', '0', process.execPath, ...options] } : { execArgv: [...process.execArgv, ...options] }),
  })
  teardown.push(
    () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve()
        const killer = setTimeout(() => child.kill('SIGKILL'), 5000)
        child.once('exit', () => {
          clearTimeout(killer)
          resolve()
        })
        child.send('exit')
      }),
  )
  const { port, grpcPort } = await new Promise<Listening>((resolve, reject) => {
    child.once('message', (m) => resolve(m as Listening))
    child.once('exit', (code) => reject(new Error(`${name} exited with ${code}`)))
  })
  const stats = (): Promise<Stats> =>
    new Promise((resolve) => {
      child.once('message', (m) => resolve(m as Stats))
      child.send('stats')
    })
  const profile = (command: 'start' | { file: string }): Promise<void> =>
    new Promise((resolve) => {
      child.once('message', () => resolve())
      child.send(command === 'start' ? 'profile-start' : { profileTo: command.file })
    })
  if (PERF_ALL)
    return {
      name,
      origin: `http://127.0.0.1:${port}`,
      ...(grpcPort === undefined ? {} : { grpcAddress: `127.0.0.1:${grpcPort}` }),
      stats,
      ...perfProfile(child.pid as number),
    }
  return { name, origin: `http://127.0.0.1:${port}`, ...(grpcPort === undefined ? {} : { grpcAddress: `127.0.0.1:${grpcPort}` }), stats, profile }
}

/** A server's profile by `perf record` of its process: started, then stopped and moved to the file asked for. */
function perfProfile(pid: number): Pick<Server, 'profile' | 'profiler'> {
  let stop: (() => Promise<void>) | undefined
  const recording = join(tmpdir(), `bench-${pid}.perf.data`)
  return {
    profiler: 'perf',
    profile: async (command) => {
      if (command === 'start') stop = perfRecord(pid, recording)
      else {
        await stop?.()
        renameSync(recording, command.file)
      }
    },
  }
}

/** A row autocannon drives: HTTP/1.1 requests of `path` with `headers`, answered `status`. */
interface HttpRow {
  kind?: 'http'
  name: string
  server: Server
  path: string
  headers: Record<string, string>
  status: number
  /** The oauth2-proxy row that does what this one does: the ratio to it is taken per round. */
  versus?: Row
}

/** A row of unary gRPC calls (grpc-load.ts): `call` resolves whether the answer was the expected one. */
interface GrpcRow {
  kind: 'grpc'
  name: string
  server: Server
  /** What the row expects, for the results: e.g. `CheckResponse status.code 0 (OK)`. */
  expected: string
  call(): Promise<boolean>
  /** The call on the wire, for h2load: the service's address, the method's path and the encoded request. */
  wire: { address: string; path: string; message: Buffer }
  versus?: Row
}

type Row = HttpRow | GrpcRow

interface Measure {
  rps: number
  p50: number
  p99: number
  cpuMicrosPerRequest: number
  maxRssMiB: number
  requests: number
  unexpected: number
  /** The share of the host's CPU (1: every core busy) used by processes outside the bench meanwhile. */
  othersCpuShare: number
  /**
   * TCP connections the host opened per request meanwhile (autocannon's 50 at the start, a
   * proxy's new connections to the upstream, anything else on the host): a proxy that keeps its
   * upstream connections reads about 0.
   */
  connectsPerRequest: number
}

/** Runs the row's load for `seconds`; the server's CPU per request is its CPU time over the requests answered. */
async function load(row: Row, seconds: number): Promise<Measure> {
  const host = readHost()
  const opens = tcpActiveOpens()
  const m = await loadOnly(row, seconds)
  return { ...m, othersCpuShare: othersShare(host, readHost(), cpus().length), connectsPerRequest: (tcpActiveOpens() - opens) / m.requests }
}

async function loadOnly(row: Row, seconds: number): Promise<Omit<Measure, 'othersCpuShare' | 'connectsPerRequest'>> {
  const before = await row.server.stats()
  if (row.kind === 'grpc') {
    const { address, path, message } = row.wire
    const result = H2LOAD.available
      ? await h2loadUnary(address, path, message, CONNECTIONS, seconds, pinned ? 1 : undefined)
      : await grpcLoad(() => row.call(), CONNECTIONS, seconds)
    const after = await row.server.stats()
    // h2load reads HTTP statuses only: the answer to the same request is checked once more.
    if (H2LOAD.available && !(await row.call())) result.unexpected = result.requests
    return {
      rps: result.rps,
      p50: result.p50,
      p99: result.p99,
      cpuMicrosPerRequest: result.requests === 0 ? Number.NaN : (after.cpuMicros - before.cpuMicros) / result.requests,
      maxRssMiB: after.maxRssBytes / 1024 / 1024,
      requests: result.requests,
      unexpected: result.unexpected + result.errors,
    }
  }
  let unexpected = 0
  const result = await autocannon({
    url: row.server.origin + row.path,
    connections: CONNECTIONS,
    duration: seconds,
    ...(RATE === undefined ? {} : { overallRate: RATE }),
    headers: row.headers,
    setupClient(client) {
      client.on('response', (statusCode: number) => {
        if (statusCode !== row.status) unexpected++
      })
    },
  })
  const after = await row.server.stats()
  const requests = result.requests.total
  return {
    rps: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    cpuMicrosPerRequest: requests === 0 ? Number.NaN : (after.cpuMicros - before.cpuMicros) / requests,
    maxRssMiB: after.maxRssBytes / 1024 / 1024,
    requests,
    unexpected: unexpected + result.errors,
  }
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2
}

async function main(): Promise<void> {
  const upstream = await startServer('upstream', { kind: 'upstream' })
  const bare = await startServer('bare proxy', { kind: 'bare', upstream: upstream.origin })
  const bareWarn = await startServer('bare proxy, logger at warn', { kind: 'bare', upstream: upstream.origin, logger: 'warn' })
  const bareLine = await startServer('bare proxy, access line', { kind: 'bare', upstream: upstream.origin, logger: 'access-line' })
  const fastifyFloor = await startServer('fastify', { kind: 'fastify' })

  const redisInstalled = spawnSync('redis-server', ['--version']).status === 0
  // The features that cost something per request when on: a DPoP key in every session
  // cookie, and an identity assertion per session and upstream (signed once, then reused).
  const assertionKey = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ format: 'pem', type: 'pkcs8' }).toString()
  const variants: Array<{ name: string; config: Record<string, unknown>; provider?: Record<string, unknown>; upstream?: Record<string, unknown> }> = [
    { name: 'cookie', config: {} },
    { name: 'memory', config: { session: { store: 'memory' } } },
    { name: '1000 routes', config: {} },
    { name: 'dpop', config: {}, provider: { dpop: true } },
    { name: 'assertion', config: { assertions: { signingKeys: [assertionKey] } }, upstream: { identityAssertion: true } },
    // A Transaction Token per request (draft-ietf-oauth-transaction-tokens): signed every time, never cached.
    {
      name: 'transaction tokens',
      config: { assertions: { signingKeys: [assertionKey] } },
      upstream: { transactionTokens: { trustDomain: 'bench.example', scope: ['bench'] } },
    },
    // An upstream with its own token (RFC 8693), exchanged at the first request and
    // reused from the cache for the hour the provider gives it.
    { name: 'token exchange', config: {}, upstream: { tokenExchange: { audience: 'bench-api', scope: ['api.read'] } } },
    // forwardAuth.cache on: the check endpoints' decisions reused for 5 s (off by default).
    { name: 'decision cache', config: { forwardAuth: { cache: { enabled: true } } } },
    // providers: three, the session the first one's (the providers are set where the YAML is written).
    { name: 'several providers', config: {} },
    // No request line (log.level above info), beside oauth2-proxy's --request-logging=false.
    { name: 'log warn', config: { log: { level: 'warn' } } },
  ]
  // telemetry.tracing at 100% and 1% sampled (off is the cookie row), exporting to a collector
  // that accepts and discards, in this process: the cost is the gateway's spans, batches and posts.
  const collector = createHttpServer((req, res) => {
    req.resume()
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{}'))
  })
  await new Promise<void>((resolve) => collector.listen(0, '127.0.0.1', resolve))
  teardown.push(() => new Promise<void>((resolve) => collector.close(() => resolve())))
  const endpoint = `http://127.0.0.1:${(collector.address() as AddressInfo).port}/v1/traces`
  for (const [name, sampleRatio] of [
    ['tracing 100%', 1],
    ['tracing 1%', 0.01],
  ] as const) {
    variants.push({ name, config: { telemetry: { tracing: { endpoint, sampleRatio } } } })
  }
  let redisUrl: string | undefined
  if (redisInstalled) {
    const redis = await startRedis({ teardown: (fn) => teardown.push(fn) })
    redisUrl = redis.url
    variants.push({ name: 'redis', config: { session: { store: 'redis', redisUrl } } })
    // The same store on Redis's two highly available topologies, each write followed by WAIT 1.
    const t = { teardown: (fn: () => unknown) => teardown.push(fn) }
    if (spawnSync('redis-sentinel', ['--version']).status === 0) {
      const sentinel = await startSentinel(t)
      const nodes = sentinel.sentinels.map((n) => `${n.host}:${n.port}`)
      variants.push({ name: 'redis sentinel', config: { session: { store: 'redis', redis: { sentinels: { name: sentinel.name, nodes } } } } })
    }
    const cluster = await startCluster(t)
    variants.push({
      name: 'redis cluster',
      config: { session: { store: 'redis', redis: { cluster: { nodes: cluster.nodes.map((n) => `${n.host}:${n.port}`) } } } },
    })
  }
  const apache = apacheAvailable()
  if (!apache.available) process.stderr.write(`no Apache rows: ${apache.why}\n`)
  process.stderr.write(`gRPC load: ${H2LOAD.available ? 'h2load' : `the Node HTTP/2 client (${H2LOAD.why ?? ''})`}\n`)
  const apacheModes: ApacheMode[] = apache.available ? ['client-cookie', 'shm'] : []
  // The gateway as `openid-gateway run` starts it, with server.workers: 1 and 2 pinned to the
  // servers' core, and 2 on both cores (shared with the load generator).
  const cliRuns = [
    { workers: 1, pin: pinned },
    { workers: 2, pin: pinned },
    { workers: 2, pin: false },
  ]
  // oauth2-proxy with request logging on (its default) and off, when one of its rows runs.
  const o2pRuns = [O2P_ROW, O2P_AUTH_ROW].some(selected) ? [true] : []
  if ([O2P_QUIET_ROW, O2P_AUTH_QUIET_ROW].some(selected)) o2pRuns.push(false)
  // Every port at once, each held until all are found: ports picked one by one may repeat, and a
  // gateway started on a port another server of the bench holds measured a machine busy with it.
  const allPorts = await freePorts(variants.length + apacheModes.length + cliRuns.length + o2pRuns.length)
  const ports = allPorts.slice(0, variants.length)
  const apachePorts = allPorts.slice(variants.length, variants.length + apacheModes.length)
  const cliPorts = allPorts.slice(variants.length + apacheModes.length, variants.length + apacheModes.length + cliRuns.length)
  const o2pPorts = allPorts.slice(variants.length + apacheModes.length + cliRuns.length)
  const origins = ports.map((p) => `http://127.0.0.1:${p}`)
  const cliOrigins = cliPorts.map((p) => `http://127.0.0.1:${p}`)
  // Two more providers for the several-providers row: the session is the first one's; the others
  // are configured, discovered and never used by the measured requests.
  const SEVERAL = ['main', 'second', 'third']
  const severalIndex = variants.findIndex((v) => v.name === 'several providers')
  const others = await Promise.all(
    SEVERAL.slice(1).map(() =>
      startDevProvider({ clients: [{ clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, redirectUris: ['http://127.0.0.1/unused'] }] }),
    ),
  )
  for (const other of others) teardown.push(() => other.close())
  const provider = await startDevProvider({
    accessTokenTtlSeconds: 3600,
    // A P-256 key next to the RSA one, for the ES256 Bearer row.
    idTokenSigningAlg: 'ES256',
    tokenExchange: { audiences: ['bench-api'], expiresInSeconds: 3600 },
    clients: [
      {
        clientId: CLIENT_ID,
        clientSecret: CLIENT_SECRET,
        redirectUris: [
          ...[...origins, ...cliOrigins].map((o) => `${o}/api/v1/openid/callback`),
          ...origins.map((o) => `${o}/api/v1/openid/callback/${SEVERAL[0]}`),
          ...apachePorts.map((p) => apacheRedirectUri(`http://127.0.0.1:${p}`)),
          ...o2pPorts.map((p) => oauth2ProxyRedirectUri(`http://127.0.0.1:${p}`)),
        ],
      },
    ],
  })
  teardown.push(() => provider.close())

  // oauth2-proxy, signed in through its own flow; each process serves a signed-in request and its
  // check. Started first, seconds after its port was picked: a port held by nothing for long may be
  // handed to another process (a client connection takes its port from the same range).
  const perf = PROFILE && o2pRuns.length > 0 && perfAvailable()
  if (PROFILE && o2pRuns.length > 0 && !perf) process.stderr.write('oauth2-proxy not profiled: `perf record -e cpu-clock` does not work here\n')
  const o2p: Array<{ logging: boolean; proxy: BenchOAuth2Proxy; proxied: HttpRow; auth: HttpRow }> = []
  for (const [i, logging] of o2pRuns.entries()) {
    const proxy = await startBenchOAuth2Proxy((fn) => teardown.push(fn), {
      port: o2pPorts[i] as number,
      issuer: provider.issuer,
      clientId: CLIENT_ID,
      clientSecret: CLIENT_SECRET,
      upstream: upstream.origin,
      requestLogging: logging,
      pinned,
    })
    const server: Server = {
      name: `oauth2-proxy${logging ? '' : ', request logging off'}`,
      origin: proxy.origin,
      stats: proxy.stats,
      ...(perf ? perfProfile(proxy.pid) : {}),
    }
    const cookieHeader = await signInOAuth2Proxy(proxy.origin, 'alice')
    o2p.push({
      logging,
      proxy,
      proxied: { name: logging ? O2P_ROW : O2P_QUIET_ROW, server, path: '/page', headers: { accept: 'application/json', cookie: cookieHeader }, status: 200 },
      // ingress-nginx's auth_request: the client's cookie and the original method and URL; 202 is oauth2-proxy's allow.
      auth: {
        name: logging ? O2P_AUTH_ROW : O2P_AUTH_QUIET_ROW,
        server,
        path: '/oauth2/auth',
        headers: { accept: 'application/json', cookie: cookieHeader, 'x-original-method': 'GET', 'x-original-url': `${proxy.origin}/page` },
        status: 202,
      },
    })
  }

  const gateways = new Map<string, Server>()
  for (const [i, variant] of variants.entries()) {
    const many = variant.name === '1000 routes'
    const upstreams = [
      ...(many ? Array.from({ length: 1000 }, (_, r) => ({ name: `r${r}`, match: { pathPrefix: `/r${r}` }, target: upstream.origin })) : []),
      {
        name: 'app',
        target: upstream.origin,
        ...(many ? { publicPaths: Array.from({ length: 100 }, (_, g) => `/public${g}/**/*.css`) } : {}),
        ...variant.upstream,
      },
    ]
    const first = { issuer: provider.issuer, clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, allowInsecureHttp: true, ...variant.provider }
    const identity =
      i === severalIndex
        ? {
            providers: [
              { name: SEVERAL[0], ...first },
              ...others.map((other, n) => ({
                name: SEVERAL[n + 1],
                issuer: other.issuer,
                clientId: CLIENT_ID,
                clientSecret: CLIENT_SECRET,
                allowInsecureHttp: true,
              })),
            ],
          }
        : { provider: first }
    const yaml = stringify({
      server: { host: '127.0.0.1', port: ports[i], publicUrl: origins[i], managementPort: 0 },
      ...identity,
      cookies: { secrets: [COOKIE_SECRET], secure: false },
      ...variant.config,
      upstreams: i === severalIndex ? upstreams.map((u) => ({ ...u, providers: ['*'] })) : upstreams,
    })
    // The cookie gateway also serves Envoy's ext_authz over gRPC, for the gRPC check row (only
    // when that row runs: gRPC is loaded only when it is on, as in the CLI).
    const grpc = variant.name === 'cookie' && selected(GRPC_ROW) ? { grpcPort: 0 } : {}
    gateways.set(variant.name, await startServer(`gateway (${variant.name})`, { kind: 'gateway', port: ports[i] as number, yaml, ...grpc }))
  }

  // dana is in 150 groups: her session cookie is chunked.
  const signedIn = async (gateway: Server, user = 'alice', query = ''): Promise<string> => {
    const browser = new Browser()
    const res = await browser.signIn(`${gateway.origin}/api/v1/openid/redirect${query}`, user)
    if (res.status !== 200) throw new Error(`sign-in through ${gateway.name} failed: ${res.status}`)
    return browser.cookieHeader(gateway.origin)
  }
  const cookie = gateways.get('cookie') as Server
  const json = { accept: 'application/json' }
  const accessClaims = { sub: 'alice', aud: CLIENT_ID, client_id: CLIENT_ID, scope: 'openid' }
  const bearer = (alg: string): Promise<string> => provider.signJwt(accessClaims, { alg, typ: 'at+jwt', expiresIn: 3600 })

  const o2pRows = (logging: boolean, kind: 'proxied' | 'auth'): HttpRow[] => o2p.filter((p) => p.logging === logging).map((p) => p[kind])
  const quiet = gateways.get('log warn') as Server

  const rows: Row[] = [
    { name: FLOOR_ROW, server: upstream, path: '/page', headers: json, status: 200 },
    { name: FASTIFY_ROW, server: fastifyFloor, path: '/page', headers: json, status: 200 },
    { name: BARE_ROW, server: bare, path: '/page', headers: json, status: 200 },
    { name: BARE_WARN_ROW, server: bareWarn, path: '/page', headers: json, status: 200 },
    { name: BARE_LINE_ROW, server: bareLine, path: '/page', headers: json, status: 200 },
    { name: 'gateway, cookie session', server: cookie, path: '/page', headers: { ...json, cookie: await signedIn(cookie) }, status: 200 },
    ...o2pRows(true, 'proxied'),
    {
      name: 'gateway, cookie session, request logging off (log.level warn)',
      server: quiet,
      path: '/page',
      headers: { ...json, cookie: await signedIn(quiet) },
      status: 200,
    },
    ...o2pRows(false, 'proxied'),
    {
      name: 'gateway, cookie session, large (chunked)',
      server: cookie,
      path: '/page',
      headers: { ...json, cookie: await signedIn(cookie, 'dana') },
      status: 200,
    },
  ]
  for (const name of ['memory', 'redis', 'redis sentinel', 'redis cluster']) {
    const gateway = gateways.get(name)
    if (gateway !== undefined)
      rows.push({ name: `gateway, ${name} store`, server: gateway, path: '/page', headers: { ...json, cookie: await signedIn(gateway) }, status: 200 })
  }
  const several = gateways.get('several providers') as Server
  rows.push({
    name: 'gateway, cookie session, three providers configured',
    server: several,
    path: '/page',
    headers: { ...json, cookie: await signedIn(several, 'alice', `?provider=${SEVERAL[0]}`) },
    status: 200,
  })
  for (const [name, row] of [
    ['dpop', 'DPoP-bound session (provider.dpop)'],
    ['assertion', 'identity assertion (ES256, cached)'],
    ['transaction tokens', 'Transaction Token per request (ES256)'],
    ['token exchange', 'token exchange upstream (RFC 8693, cached)'],
    ['tracing 100%', 'tracing on, 100% sampled'],
    ['tracing 1%', 'tracing on, 1% sampled'],
  ] as const) {
    const gateway = gateways.get(name) as Server
    rows.push({ name: `gateway, cookie session, ${row}`, server: gateway, path: '/page', headers: { ...json, cookie: await signedIn(gateway) }, status: 200 })
  }
  rows.push(
    { name: 'gateway, Bearer JWT (RS256)', server: cookie, path: '/page', headers: { ...json, authorization: `Bearer ${await bearer('RS256')}` }, status: 200 },
    { name: 'gateway, Bearer JWT (ES256)', server: cookie, path: '/page', headers: { ...json, authorization: `Bearer ${await bearer('ES256')}` }, status: 200 },
    { name: 'gateway, unauthenticated (401)', server: cookie, path: '/page', headers: json, status: 401 },
    { name: 'gateway, unauthenticated navigation (302 to sign-in)', server: cookie, path: '/page', headers: { accept: 'text/html' }, status: 302 },
  )
  for (const [i, mode] of apacheModes.entries()) {
    const httpd = await startApache({
      mode,
      port: apachePorts[i] as number,
      upstream: upstream.origin,
      issuer: provider.issuer,
      clientId: CLIENT_ID,
      clientSecret: CLIENT_SECRET,
      pinned,
    })
    teardown.push(() => httpd.stop())
    const server: Server = { name: `apache (${mode})`, origin: httpd.origin, stats: () => httpd.stats() }
    const cookieHeader = await signInApache(new Browser(), httpd.origin, 'alice')
    rows.push({ name: `Apache + mod_auth_openidc, ${mode}`, server, path: '/page', headers: { ...json, cookie: cookieHeader }, status: 200 })
  }
  for (const [i, run] of cliRuns.entries()) {
    const origin = cliOrigins[i] as string
    const yaml = stringify({
      server: { host: '127.0.0.1', port: cliPorts[i], publicUrl: origin, managementPort: 0, workers: run.workers },
      provider: { issuer: provider.issuer, clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, allowInsecureHttp: true },
      cookies: { secrets: [COOKIE_SECRET], secure: false },
      upstreams: [{ name: 'app', target: upstream.origin }],
    })
    const dir = mkdtempSync(join(tmpdir(), 'bench-workers-'))
    writeFileSync(join(dir, 'gateway.yaml'), yaml)
    const args = [...GATEWAY_NODE_OPTIONS, CLI, '--config', join(dir, 'gateway.yaml')]
    // Workers inherit the primary's CPU affinity.
    const cli = run.pin
      ? spawn('taskset', ['-c', '0', process.execPath, ...args], { stdio: ['ignore', 'ignore', 'inherit'] })
      : spawn(process.execPath, args, { stdio: ['ignore', 'ignore', 'inherit'] })
    teardown.push(
      () =>
        new Promise<void>((resolve) => {
          if (cli.exitCode !== null) return resolve()
          cli.once('exit', () => resolve())
          cli.kill('SIGTERM')
        }),
    )
    for (let attempt = 0; ; attempt++) {
      const res = await fetch(`${origin}/api/v1/openid/redirect`, { redirect: 'manual' }).catch(() => undefined)
      if (res?.status === 302) break
      if (attempt > 200) throw new Error(`the gateway with server.workers: ${run.workers} did not start`)
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
    // taskset execs node in place: the spawned process is the gateway (the primary with workers).
    const pid = cli.pid as number
    const where = run.pin ? 'pinned to core 0' : 'not pinned'
    const server: Server = { name: `gateway, ${run.workers} workers, ${where}`, origin, stats: async () => treeStats(pid) }
    rows.push({
      name: `gateway, cookie session, server.workers ${run.workers} (openid-gateway run, ${where})`,
      server,
      path: '/page',
      headers: { ...json, cookie: await signedIn(server) },
      status: 200,
    })
  }
  const many = gateways.get('1000 routes') as Server
  rows.push({
    name: 'gateway, 1000 routes + 100 public globs',
    server: many,
    path: '/r999/page',
    headers: { ...json, cookie: await signedIn(many) },
    status: 200,
  })
  const forwardCookie = await signedIn(cookie)
  rows.push({
    name: 'forward-auth endpoint (ingress-nginx)',
    server: cookie,
    path: '/api/v1/openid/auth',
    headers: { ...json, cookie: forwardCookie, 'x-original-method': 'GET', 'x-original-url': `${cookie.origin}/page` },
    status: 200,
  })
  rows.push(...o2pRows(true, 'auth'), {
    name: 'forward-auth endpoint (ingress-nginx), request logging off (log.level warn)',
    server: quiet,
    path: '/api/v1/openid/auth',
    headers: { ...json, cookie: await signedIn(quiet), 'x-original-method': 'GET', 'x-original-url': `${quiet.origin}/page` },
    status: 200,
  })
  rows.push(...o2pRows(false, 'auth'))
  const cached = gateways.get('decision cache') as Server
  rows.push({
    name: 'forward-auth endpoint (ingress-nginx), decision cache on',
    server: cached,
    path: '/api/v1/openid/auth',
    headers: { ...json, cookie: await signedIn(cached), 'x-original-method': 'GET', 'x-original-url': `${cached.origin}/page` },
    status: 200,
  })
  // Envoy's ext_authz (test/fixtures/envoy.ts): the client's method, path_prefix + the client's
  // path, the client's Host (here the gateway's own, which the `app` upstream matches), no body,
  // and the allow-listed headers; a signed-in session, so 200: allowed.
  const extAuthzCookie = await signedIn(cookie)
  rows.push({
    name: 'ext_authz HTTP check (Envoy)',
    server: cookie,
    path: `${EXT_AUTHZ_PATH}/page`,
    headers: { host: new URL(cookie.origin).host, cookie: extAuthzCookie, ...json, 'content-length': '0' },
    status: 200,
  })
  if (cookie.grpcAddress !== undefined) {
    // The same check as Envoy's gRPC ext_authz filter asks it: Authorization/Check with the
    // client's request in attributes.request.http (pseudo-headers included, as Envoy sends them),
    // many calls in flight on one HTTP/2 connection (grpc-load.ts rawUnaryCaller). OK
    // (status.code 0) is an allow.
    const host = new URL(cookie.origin).host
    const request = checkRequest({
      method: 'GET',
      host,
      path: '/page',
      scheme: 'http',
      protocol: 'HTTP/1.1',
      headers: { ':authority': host, ':method': 'GET', ':path': '/page', ':scheme': 'http', cookie: extAuthzCookie, ...json },
    })
    const check = loadEnvoyGrpcServices().authorization.Check as MethodDefinition<object, DecodedCheckResponse>
    const caller = rawUnaryCaller(cookie.grpcAddress as string, check, request)
    teardown.push(() => caller.close())
    rows.push({
      kind: 'grpc',
      name: GRPC_ROW,
      server: cookie,
      expected: 'grpc-status 0 and CheckResponse status.code 0 (OK)',
      call: async () => {
        const { status, response } = await caller.call()
        return status === 0 && response?.status?.code === 0
      },
      wire: { address: cookie.grpcAddress as string, path: check.path, message: check.requestSerialize(request) },
    })
  }

  const soakRow = rows.find((row) => row.name === 'gateway, cookie session') as Row
  if (ONLY !== undefined) rows.splice(0, rows.length, ...rows.filter((row) => ALWAYS.has(row.name) || selected(row.name)))
  // Each gateway row beside the oauth2-proxy row that does the same, when both run.
  const VERSUS: Record<string, string> = {
    'gateway, cookie session': O2P_ROW,
    'gateway, cookie session, request logging off (log.level warn)': O2P_QUIET_ROW,
    'forward-auth endpoint (ingress-nginx)': O2P_AUTH_ROW,
    'forward-auth endpoint (ingress-nginx), request logging off (log.level warn)': O2P_AUTH_QUIET_ROW,
    'ext_authz HTTP check (Envoy)': O2P_AUTH_ROW,
    [GRPC_ROW]: O2P_AUTH_ROW,
  }
  for (const row of rows) {
    const versus = rows.find((other) => other.name === VERSUS[row.name])
    if (versus !== undefined) row.versus = versus
  }
  process.stderr.write(
    `warm-up ${WARMUP_SECONDS} s per row, then ${ROUNDS} rounds of ${ROUND_SECONDS} s (taskset: ${pinned ? 'servers on core 0, load on core 1' : 'not pinned'})\n`,
  )
  for (const row of rows) await load(row, WARMUP_SECONDS)
  const measures = new Map<Row, Measure[]>(rows.map((row) => [row, []]))
  const profiled = PROFILE ? [...new Set(rows.map((row) => row.server))].filter((server) => server.profile !== undefined) : []
  for (const server of profiled) await server.profile?.('start')
  /** One round of a row; `record: false` for a partner measured beside another row, whose figures are that row's. */
  const measure = async (row: Row, round: number, record = true): Promise<Measure> => {
    const m = await load(row, ROUND_SECONDS)
    if (record) measures.get(row)?.push(m)
    process.stderr.write(
      `round ${round} ${row.name}${record ? '' : ' (beside the row it is compared with)'}: ${m.rps.toFixed(0)} req/s, ${m.cpuMicrosPerRequest.toFixed(1)} µs CPU/req, others ${(100 * m.othersCpuShare).toFixed(0)}% of the host, ${m.connectsPerRequest.toFixed(2)} TCP connects/req${m.unexpected > 0 ? `, ${m.unexpected} unexpected answers` : ''}\n`,
    )
    return m
  }
  // BENCH_PAIRED: each row's own baselines, measured just before it in every round, and the
  // oauth2-proxy row it is compared with, measured beside it (before it in every other round).
  const references = new Map<Row, { bare: Measure[]; line: Measure[]; floor: Measure[] }>()
  const partners = new Map<Row, Measure[]>()
  const byName = (name: string): Row | undefined => rows.find((row) => row.name === name)
  for (let round = 1; round <= ROUNDS; round++) {
    if (!PAIRED) {
      for (const row of rows) await measure(row, round)
      continue
    }
    for (const row of rows) {
      if (ALWAYS.has(row.name)) continue
      const refs = references.get(row) ?? { bare: [], line: [], floor: [] }
      references.set(row, refs)
      for (const [name, list] of [
        [FLOOR_ROW, refs.floor],
        [BARE_ROW, refs.bare],
        [BARE_LINE_ROW, refs.line],
      ] as const) {
        const reference = byName(name)
        if (reference !== undefined) list.push(await measure(reference, round))
      }
      if (row.versus === undefined) {
        await measure(row, round)
        continue
      }
      const partner = partners.get(row) ?? []
      partners.set(row, partner)
      if (round % 2 === 0) partner.push(await measure(row.versus, round, false))
      await measure(row, round)
      if (round % 2 === 1) partner.push(await measure(row.versus, round, false))
    }
  }

  for (const server of profiled) {
    const dir = join(process.cwd(), 'bench', 'profiles')
    mkdirSync(dir, { recursive: true })
    const perfData = server.profiler === 'perf'
    const file = join(dir, `${server.name.replace(/[^a-z0-9]+/gi, '-')}.${perfData ? 'perf.data' : 'cpuprofile'}`)
    await server.profile?.({ file })
    // Paired, a row's partner is measured again beside each row it stands for: those requests count too.
    const partnered = [...partners].filter(([row]) => row.versus?.server === server).flatMap(([, list]) => list)
    const requests = [...rows.filter((row) => row.server === server).flatMap((row) => measures.get(row) ?? []), ...partnered].reduce(
      (n, m) => n + m.requests,
      0,
    )
    process.stderr.write(`profile: node build-bench/bench/${perfData ? 'perf' : 'profile'}-summary.js ${file} ${requests}\n`)
  }

  // Paired, the baselines that are not a row's own (the Fastify route, the logger at warn) are not measured: no line for them.
  const summary = rows
    .filter((row) => (measures.get(row) ?? []).length > 0)
    .map((row) => {
      const list = measures.get(row) ?? []
      return {
        name: row.name,
        ...(row.kind === 'grpc'
          ? { load: H2LOAD.available ? 'h2load' : 'node:http2', expected: row.expected }
          : { load: 'autocannon', expectedStatus: row.status, ...(row.headers.cookie === undefined ? {} : { cookieHeaderBytes: row.headers.cookie.length }) }),
        rps: median(list.map((m) => m.rps)),
        p50Ms: median(list.map((m) => m.p50)),
        p99Ms: median(list.map((m) => m.p99)),
        cpuMicrosPerRequest: median(list.map((m) => m.cpuMicrosPerRequest)),
        peakRssMiB: Math.max(...list.map((m) => m.maxRssMiB)),
        unexpectedAnswers: list.reduce((n, m) => n + m.unexpected, 0),
        othersCpuShare: median(list.map((m) => m.othersCpuShare)),
        connectsPerRequest: median(list.map((m) => m.connectsPerRequest)),
        rounds: list,
      }
    })
  // Ratios as the targets read them: each round's figure over the same round's baseline (the
  // rows of a round run back to back, so they met the same host), then the median of the rounds.
  const roundsOf = (name: string): Measure[] => summary.find((row) => row.name === name)?.rounds ?? []
  const ratio = (list: Measure[], base: Measure[]): number => median(list.map((m, i) => m.cpuMicrosPerRequest / (base[i]?.cpuMicrosPerRequest ?? Number.NaN)))
  const bases = { bare: roundsOf(BARE_ROW), line: roundsOf(BARE_LINE_ROW), floor: roundsOf(FLOOR_ROW) }
  const withRatios = summary.map((s) => {
    // Paired, a row's rounds are divided by the baselines measured just before each of them.
    const row = rows.find((r) => r.name === s.name) as Row
    const own = references.get(row) ?? bases
    // Beside oauth2-proxy: paired, the partner's measures taken beside this row; else its own rounds.
    const versus = row.versus === undefined ? undefined : { row: row.versus.name, rounds: partners.get(row) ?? roundsOf(row.versus.name) }
    return {
      ...s,
      vsBare: ratio(s.rounds, own.bare),
      vsBareWithAccessLine: ratio(s.rounds, own.line),
      vsFloor: ratio(s.rounds, own.floor),
      ...(versus === undefined ? {} : { versus: versus.row, vsOAuth2Proxy: ratio(s.rounds, versus.rounds), oauth2ProxyRounds: versus.rounds }),
    }
  })
  const header =
    "| row | req/s | p50 ms | p99 ms | CPU µs/req | peak RSS MiB | vs bare proxy | vs bare + access line | vs floor | vs oauth2-proxy | others' CPU |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
  const lines = withRatios.map(
    (s) =>
      `| ${s.name}${s.unexpectedAnswers > 0 ? ` (${s.unexpectedAnswers} unexpected answers)` : ''} | ${s.rps.toFixed(0)} | ${s.p50Ms.toFixed(1)} | ${s.p99Ms.toFixed(1)} | ${s.cpuMicrosPerRequest.toFixed(1)} | ${s.peakRssMiB.toFixed(0)} | ${s.vsBare.toFixed(2)}x | ${s.vsBareWithAccessLine.toFixed(2)}x | ${s.vsFloor.toFixed(2)}x | ${s.vsOAuth2Proxy === undefined ? '' : `${s.vsOAuth2Proxy.toFixed(2)}x`} | ${(100 * s.othersCpuShare).toFixed(0)}% |`,
  )
  const node = process.version
  const flags = GATEWAY_NODE_OPTIONS.length === 0 ? '' : `, gateway with ${GATEWAY_NODE_OPTIONS.join(' ')}`
  const table = `Node ${node}${flags}, ${CONNECTIONS} connections${RATE === undefined ? '' : `, ${RATE} requests/s offered to every HTTP row`}${PAIRED ? ', paired (every row after its own baselines)' : ''}, ${ROUNDS} rounds of ${ROUND_SECONDS} s (medians; ratios: medians of per-round ratios; others' CPU: the host's CPU, both cores, used by processes outside the bench while the row ran), ${pinned ? 'servers pinned to core 0, autocannon to core 1' : 'not pinned'}\n\n${header}\n${lines.join('\n')}\n`
  process.stdout.write(`\n${table}`)
  let soak:
    | {
        row: string
        baseline: string
        sampleSeconds: number
        rssMiB: number[]
        baselineRssMiB: number[]
        /** [V8 heap reserved, heap used, external] at each sample. */
        heapMiB: number[][]
        baselineHeapMiB: number[][]
        cpuMicrosPerRequest: number[]
      }
    | undefined
  if (SOAK_SECONDS > 0) {
    // The gateway and the bare proxy take turns, half of each sample period each, so that both
    // series span the same minutes of the same host; RSS is read at the end of each turn.
    const baselineRow = rows.find((row) => row.name === BARE_ROW) as Row
    soak = {
      row: soakRow.name,
      baseline: baselineRow.name,
      sampleSeconds: SOAK_SAMPLE_SECONDS,
      rssMiB: [],
      baselineRssMiB: [],
      heapMiB: [],
      baselineHeapMiB: [],
      cpuMicrosPerRequest: [],
    }
    for (let elapsed = 0; elapsed < SOAK_SECONDS; elapsed += SOAK_SAMPLE_SECONDS) {
      const turn = Math.min(SOAK_SAMPLE_SECONDS, SOAK_SECONDS - elapsed) / 2
      const m = await load(soakRow, turn)
      const stats = await soakRow.server.stats()
      soak.rssMiB.push(Math.round(stats.rssBytes / MiB))
      soak.heapMiB.push([stats.heapTotalBytes, stats.heapUsedBytes, stats.externalBytes].map((b) => Math.round((b ?? Number.NaN) / MiB)))
      soak.cpuMicrosPerRequest.push(Math.round(m.cpuMicrosPerRequest * 10) / 10)
      await load(baselineRow, turn)
      const baseline = await baselineRow.server.stats()
      soak.baselineRssMiB.push(Math.round(baseline.rssBytes / MiB))
      soak.baselineHeapMiB.push([baseline.heapTotalBytes, baseline.heapUsedBytes, baseline.externalBytes].map((b) => Math.round((b ?? Number.NaN) / MiB)))
    }
    const last = (list: number[]): number => list[list.length - 1] ?? Number.NaN
    process.stdout.write(
      `\nsoak, ${SOAK_SECONDS} s, RSS MiB every ${SOAK_SAMPLE_SECONDS} s:\n${soak.row}: ${soak.rssMiB.join(', ')} (CPU µs/req: ${soak.cpuMicrosPerRequest.join(', ')})\n${soak.baseline}: ${soak.baselineRssMiB.join(', ')}\nV8 heap reserved/used/external MiB at the last sample: gateway ${(soak.heapMiB[soak.heapMiB.length - 1] ?? []).join('/')}, bare proxy ${(soak.baselineHeapMiB[soak.baselineHeapMiB.length - 1] ?? []).join('/')}\nlast sample, gateway / bare proxy: ${(last(soak.rssMiB) / last(soak.baselineRssMiB)).toFixed(2)}x\n`,
    )
  }
  // npm runs scripts from the package root.
  const dir = join(process.cwd(), 'bench', 'results')
  mkdirSync(dir, { recursive: true })
  const stamp = new Date().toISOString().replace(/[:.]/g, '-')
  const cpuModel = execFileSync('sh', ['-c', "grep -m1 'model name' /proc/cpuinfo || true"]).toString().trim()
  writeFileSync(
    join(dir, `${stamp}-node${node}.json`),
    `${JSON.stringify({ node, gatewayNodeOptions: GATEWAY_NODE_OPTIONS, oauth2Proxy: o2p.map((p) => ({ version: peerVersion('oauth2-proxy'), requestLogging: p.logging, flags: p.proxy.flags })), cpuModel, pinned, connections: CONNECTIONS, roundSeconds: ROUND_SECONDS, rounds: ROUNDS, rate: RATE, paired: PAIRED, table, rows: withRatios, soak }, null, 2)}\n`,
  )
  process.stderr.write(`written to bench/results/${stamp}-node${node}.json\n`)
}

main()
  .catch((err: unknown) => {
    process.stderr.write(`bench failed: ${err instanceof Error ? err.stack : String(err)}\n`)
    process.exitCode = 1
  })
  .finally(async () => {
    for (const fn of teardown.reverse()) await fn()
    process.exit()
  })
