// One server under test, in a process of its own so that its CPU time and memory are its own:
// the fast upstream, the bare @fastify/http-proxy baseline, or the gateway from a YAML config
// (with, when the spec has a grpcPort, the Envoy ext_authz gRPC service wired as the CLI wires
// it). The parent talks to it over IPC: it says where it listens, and answers "stats" with its
// CPU time and memory.

import { writeFileSync } from 'node:fs'
import { createServer } from 'node:http'
import { Session } from 'node:inspector/promises'
import type { AddressInfo } from 'node:net'
import httpProxy from '@fastify/http-proxy'
import Fastify, { LogController } from 'fastify'
import { destination } from 'pino'
import { buildStandaloneApp } from '#src/runtime/process-state'
import { parseConfig } from '#src/config/load'

export type ServerSpec =
  | { kind: 'upstream' }
  /** Fastify with one route answering the upstream's answer from memory: what the framework alone costs. */
  | { kind: 'fastify' }
  /**
   * logger: Fastify's pino logger at `warn` (an earlier harness's baseline), or `access-line`: at
   * `info`, Fastify's own request logging off and one line per answered request written in
   * `onResponse` (method, url, status, time, client address), as the gateway writes one, to stdout
   * in batches as the gateway's are; else none.
   */
  | { kind: 'bare'; upstream: string; logger?: 'warn' | 'access-line' }
  /** grpcPort: also the ext_authz gRPC service on 127.0.0.1 (0 picks a free port). */
  | { kind: 'gateway'; port: number; yaml: string; grpcPort?: number }

/** What a server says over IPC once it listens. */
export interface Listening {
  port: number
  /** The ext_authz gRPC service's port, when the spec asked for it. */
  grpcPort?: number
}

export interface Stats {
  /** Microseconds of user + system CPU since the process started. */
  cpuMicros: number
  rssBytes: number
  maxRssBytes: number
  /** V8's heap: reserved (heapTotal) and live (heapUsed), and memory outside it (external, buffers included). */
  heapTotalBytes?: number
  heapUsedBytes?: number
  externalBytes?: number
}

const BODY = Buffer.from('{"ok":true,"payload":"a small JSON answer of an application"}')

async function start(spec: ServerSpec): Promise<Listening> {
  if (spec.kind === 'upstream') {
    const server = createServer((req, res) => {
      req.resume()
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': BODY.length })
      res.end(BODY)
    })
    server.keepAliveTimeout = 60_000
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    return { port: (server.address() as AddressInfo).port }
  }
  if (spec.kind === 'fastify') {
    const app = Fastify({ logger: false })
    app.get('/*', (_req, reply) => {
      reply.header('content-type', 'application/json').send(BODY)
    })
    await app.listen({ host: '127.0.0.1', port: 0 })
    return { port: (app.server.address() as AddressInfo).port }
  }
  if (spec.kind === 'bare') {
    // A logger at warn writes nothing per request, but Fastify still makes each request's child logger.
    const app = Fastify({
      logger:
        spec.logger === undefined
          ? false
          : spec.logger === 'warn'
            ? { level: 'warn' }
            : // Written in batches of about 4 KiB, as the gateway writes its lines (ops/logging.ts), not one write per line.
              { level: 'info', stream: destination({ dest: 1, minLength: 4096, sync: true }) },
      ...(spec.logger === 'access-line' ? { logController: new LogController({ disableRequestLogging: true }) } : {}),
    })
    if (spec.logger === 'access-line')
      app.addHook('onResponse', (req, reply, done) => {
        req.log.info({ method: req.method, url: req.url, status: reply.statusCode, ms: reply.elapsedTime, ip: req.ip }, 'request')
        done()
      })
    await app.register(httpProxy, { upstream: spec.upstream })
    await app.listen({ host: '127.0.0.1', port: 0 })
    return { port: (app.server.address() as AddressInfo).port }
  }
  const config = parseConfig(spec.yaml, process.env)
  const app = await buildStandaloneApp(config)
  await app.providersReady
  await app.http.listen({ host: '127.0.0.1', port: spec.port })
  const port = (app.http.server.address() as AddressInfo).port
  if (spec.grpcPort === undefined) return { port }
  // Loaded only by the gateway that serves gRPC, as the CLI does (the others' memory is their own).
  const { startEnvoyGrpcListener } = await import('#src/runtime/envoy-grpc-listener')
  const grpc = await startEnvoyGrpcListener({
    host: '127.0.0.1',
    port: spec.grpcPort,
    gateway: { app },
    log: app.http.log,
  })
  return { port, grpcPort: grpc.port }
}

const spec = JSON.parse(process.argv[2] ?? '{}') as ServerSpec
/** BENCH_PROFILE: V8's profiler through the inspector, on while the bench measures. */
let profiler: Session | undefined

async function profile(message: unknown): Promise<void> {
  if (message === 'profile-start') {
    profiler = new Session()
    profiler.connect()
    await profiler.post('Profiler.enable')
    await profiler.post('Profiler.start')
  } else if (profiler !== undefined) {
    const { profile } = await profiler.post('Profiler.stop')
    writeFileSync((message as { profileTo: string }).profileTo, JSON.stringify(profile))
    profiler.disconnect()
    profiler = undefined
  }
}

start(spec).then(
  (listening) => {
    process.on('message', (message) => {
      if (message === 'exit') process.exit(0)
      if (message === 'profile-start' || (typeof message === 'object' && message !== null && 'profileTo' in message)) {
        void profile(message).then(() => process.send?.('profiled'))
        return
      }
      if (message !== 'stats') return
      const cpu = process.cpuUsage()
      const memory = process.memoryUsage()
      const stats: Stats = {
        cpuMicros: cpu.user + cpu.system,
        rssBytes: memory.rss,
        maxRssBytes: process.resourceUsage().maxRSS * 1024,
        heapTotalBytes: memory.heapTotal,
        heapUsedBytes: memory.heapUsed,
        externalBytes: memory.external,
      }
      process.send?.(stats)
    })
    process.send?.(listening)
  },
  (err: unknown) => {
    process.stderr.write(`bench server ${spec.kind} failed: ${err instanceof Error ? err.stack : String(err)}\n`)
    process.exit(1)
  },
)
