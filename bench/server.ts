// One server under test, in a process of its own so that its CPU time and memory are its own:
// the fast upstream, the bare @fastify/http-proxy baseline, or the gateway from a YAML config.
// The parent talks to it over IPC: it says where it listens, and answers "stats" with its CPU
// time and memory.

import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import httpProxy from '@fastify/http-proxy'
import Fastify, { type FastifyInstance } from 'fastify'
import { buildApp } from '../src/app.js'
import { parseConfig } from '../src/config/load.js'

export type ServerSpec =
  | { kind: 'upstream' }
  | { kind: 'bare'; upstream: string }
  | { kind: 'gateway'; port: number; yaml: string }

export interface Stats {
  /** Microseconds of user + system CPU since the process started. */
  cpuMicros: number
  rssBytes: number
  maxRssBytes: number
}

const BODY = Buffer.from('{"ok":true,"payload":"a small JSON answer of an application"}')

async function start(spec: ServerSpec): Promise<number> {
  if (spec.kind === 'upstream') {
    const server = createServer((req, res) => {
      req.resume()
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': BODY.length })
      res.end(BODY)
    })
    server.keepAliveTimeout = 60_000
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    return (server.address() as AddressInfo).port
  }
  let app: FastifyInstance
  if (spec.kind === 'bare') {
    app = Fastify({ logger: false })
    await app.register(httpProxy, { upstream: spec.upstream })
  } else {
    app = await buildApp(parseConfig(spec.yaml, process.env))
    await app.providerReady
  }
  await app.listen({ host: '127.0.0.1', port: spec.kind === 'gateway' ? spec.port : 0 })
  return (app.server.address() as AddressInfo).port
}

const spec = JSON.parse(process.argv[2] ?? '{}') as ServerSpec
start(spec).then(
  (port) => {
    process.on('message', (message) => {
      // A clean exit, so that --cpu-prof (BENCH_PROFILE) writes its profile.
      if (message === 'exit') process.exit(0)
      if (message !== 'stats') return
      const cpu = process.cpuUsage()
      const stats: Stats = { cpuMicros: cpu.user + cpu.system, rssBytes: process.memoryUsage().rss, maxRssBytes: process.resourceUsage().maxRSS * 1024 }
      process.send?.(stats)
    })
    process.send?.({ port })
  },
  (err: unknown) => {
    process.stderr.write(`bench server ${spec.kind} failed: ${err instanceof Error ? err.stack : String(err)}\n`)
    process.exit(1)
  },
)
