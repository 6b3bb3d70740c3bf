import { createHash } from 'node:crypto'
import { unwatchFile, watchFile } from 'node:fs'
import { createServer, ServerResponse, type IncomingMessage, type Server } from 'node:http'
import type { Socket } from 'node:net'
import type { Duplex } from 'node:stream'
import type { FastifyInstance } from 'fastify'
import { buildApp, MAX_HEADER_BYTES, type BuildOptions, type LiveState } from '../app.js'
import { ConfigError, parseConfig, readConfigFile } from '../config/load.js'
import type { GatewayConfig } from '../config/types.js'
import { clientErrorHandler } from './hygiene.js'
import type { ReadinessCheck } from './management.js'

// Live reload: the gateway behind one listening server, whose configuration can be replaced while
// it runs (SIGHUP, or a change of the file with server.watchConfig). The new file is read and
// validated in full and a whole new app is built from it (routes, rules, providers, cookie
// secrets, keys); only once it is ready, providers discovered, does the server hand it the next
// request. Requests under way finish on the app they started on, which is closed once they have
// (at most server.shutdownTimeoutMs later); proxied WebSockets stay open. What outlives one
// configuration (sessions of the memory store, the revocation list, the logout-token replay guard,
// refreshes under way, the metrics) is carried from app to app (app.ts's LiveState). A file that
// fails anything keeps the running configuration, and the log names every problem by key.

/**
 * Keys a reload cannot change: the listeners and processes, and where the state that outlives a
 * configuration lives. A reload that changes one is refused, saying so (restart instead).
 */
export const RESTART_KEYS = [
  'server.host',
  'server.port',
  'server.managementPort',
  'server.workers',
  'session.store',
  'session.redisUrl',
  'session.redis',
  'session.maxAgeSeconds',
  'session.memory',
] as const

/** How often a watched file is looked at (server.watchConfig). */
export const WATCH_INTERVAL_MS = 2000

export interface LiveOptions extends Omit<BuildOptions, 'live'> {
  /** The configuration file, read again on every reload. */
  path: string
  env?: NodeJS.ProcessEnv
}

export type ReloadTrigger = 'SIGHUP' | 'file' | 'primary'

/** The running configuration as the management listener shows it. */
export interface ConfigState {
  /** `sha256:` and the hex digest of the file as read. */
  hash: string
  loadedAt: string
}

export function configHash(text: string): string {
  return `sha256:${createHash('sha256').update(text).digest('hex')}`
}

function valueAt(config: GatewayConfig, key: string): unknown {
  return key.split('.').reduce<unknown>((node, part) => (node as Record<string, unknown> | undefined)?.[part], config)
}

/** The RESTART_KEYS whose value differs between `running` and `next`. */
export function restartKeysChanged(running: GatewayConfig, next: GatewayConfig): string[] {
  return RESTART_KEYS.filter((key) => JSON.stringify(valueAt(running, key)) !== JSON.stringify(valueAt(next, key)))
}

export class LiveGateway {
  readonly server: Server
  readonly #options: LiveOptions
  readonly #live: LiveState
  #app: FastifyInstance
  #config: GatewayConfig
  #state: ConfigState
  /** Requests under way per app; an app being retired is closed when its count reaches 0. */
  readonly #inflight = new Map<FastifyInstance, number>()
  readonly #retiring = new Map<FastifyInstance, () => void>()
  #queue: Promise<unknown> = Promise.resolve()
  #watching = false

  private constructor(options: LiveOptions, live: LiveState, app: FastifyInstance, config: GatewayConfig, state: ConfigState) {
    this.#options = options
    this.#live = live
    this.#app = app
    this.#config = config
    this.#state = state
    // As Fastify configures its own server (its defaults), with the gateway's header limit.
    this.server = createServer({ maxHeaderSize: MAX_HEADER_BYTES }, (req, res) => this.#request(req, res))
    this.server.keepAliveTimeout = 72_000
    this.server.requestTimeout = 0
    this.server.on('clientError', (err: Error & { code?: string }, socket: Socket) => clientErrorHandler.call(this.#app, err, socket))
    this.server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => this.#upgrade(req, socket, head))
    live.metrics?.configLoaded(state.hash, new Date(state.loadedAt))
  }

  /** Reads and validates the file (a ConfigError says what is wrong) and builds the first app. */
  static async start(options: LiveOptions): Promise<LiveGateway> {
    const text = readConfigFile(options.path)
    const config = parseConfig(text, options.env, options.path)
    const live: LiveState = {}
    const app = await buildApp(config, { ...options, live })
    await app.ready()
    const gateway = new LiveGateway(options, live, app, config, { hash: configHash(text), loadedAt: new Date().toISOString() })
    gateway.#watch(config.server.watchConfig)
    return gateway
  }

  /** The app serving new requests. */
  get app(): FastifyInstance {
    return this.#app
  }

  get config(): GatewayConfig {
    return this.#config
  }

  get state(): ConfigState {
    return this.#state
  }

  /**
   * The readiness checks of the running app, looked up at each probe (their names do not change
   * with a reload: they follow session.store and session.redisUrl, which need a restart).
   */
  get checks(): ReadinessCheck[] {
    return this.#app.management.checks.map((check) => ({
      name: check.name,
      ready: () => this.#app.management.checks.find((c) => c.name === check.name)?.ready() ?? false,
    }))
  }

  async listen(): Promise<string> {
    const { host, port } = this.#config.server
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject)
      this.server.listen({ host, port }, () => {
        this.server.off('error', reject)
        resolve()
      })
    })
    const address = this.server.address()
    const where = typeof address === 'string' || address === null ? String(address) : `http://${address.family === 'IPv6' ? `[${address.address}]` : address.address}:${address.port}`
    this.#app.log.info({ address: where, config: this.#state.hash }, 'listening')
    return where
  }

  /**
   * Loads the file again and, when it is valid in full and its app is ready, swaps it in; true
   * when it did. Reloads run one after the other.
   */
  reload(trigger: ReloadTrigger): Promise<boolean> {
    const run = this.#queue.then(() => this.#reload(trigger))
    this.#queue = run.catch(() => undefined)
    return run
  }

  /**
   * Stops accepting connections and waits for requests under way (cut after `boundMs`), then
   * closes every app.
   */
  async close(boundMs: number): Promise<void> {
    this.#watch(false)
    const bound = setTimeout(() => {
      this.#app.log.warn('shutdown timeout reached: closing the remaining connections')
      this.server.closeAllConnections()
    }, boundMs)
    bound.unref()
    await new Promise<void>((resolve) => this.server.close(() => resolve()))
    this.server.closeIdleConnections()
    clearTimeout(bound)
    for (const close of this.#retiring.values()) close()
    await this.#app.close()
  }

  async #reload(trigger: ReloadTrigger): Promise<boolean> {
    const log = this.#app.log
    const refuse = (problems: readonly string[], message: string): false => {
      for (const problem of problems) log.error({ trigger, problem }, 'configuration problem')
      log.error({ trigger, problems: problems.length, config: this.#state.hash }, `configuration reload refused (${message}): the running configuration is kept`)
      this.#live.metrics?.observeReload('failure')
      return false
    }
    let text: string
    let config: GatewayConfig
    try {
      text = readConfigFile(this.#options.path)
      config = parseConfig(text, this.#options.env, this.#options.path)
    } catch (err) {
      if (err instanceof ConfigError) return refuse(err.issues, 'invalid file')
      throw err
    }
    const changed = restartKeysChanged(this.#config, config)
    if (changed.length > 0) return refuse(changed.map((key) => `${key}: changed, which takes a restart`), 'keys that take a restart')
    let next: FastifyInstance | undefined
    try {
      next = await buildApp(config, { ...this.#options, live: this.#live })
      await next.ready()
      // A reload never turns a gateway whose providers are discovered into one whose are not.
      const undiscovered = await discovered(next, config).then(() => undefined, (err: unknown) => err)
      if (undiscovered !== undefined && (await providersReady(this.#app))) throw undiscovered
    } catch (err) {
      await next?.close().catch(() => undefined)
      const problems = err instanceof ConfigError ? err.issues : [err instanceof Error ? err.message : String(err)]
      return refuse(problems, 'the new configuration cannot start')
    }
    const previous = this.#app
    this.#app = next
    this.#config = config
    this.#state = { hash: configHash(text), loadedAt: new Date().toISOString() }
    this.#live.metrics?.configLoaded(this.#state.hash, new Date(this.#state.loadedAt))
    this.#live.metrics?.observeReload('success')
    this.#retire(previous, config.server.shutdownTimeoutMs)
    this.#watch(config.server.watchConfig)
    next.log.info({ trigger, config: this.#state.hash }, 'configuration reloaded')
    return true
  }

  #request(req: IncomingMessage, res: ServerResponse): void {
    const app = this.#app
    this.#inflight.set(app, (this.#inflight.get(app) ?? 0) + 1)
    res.once('close', () => this.#finished(app))
    app.routing(req, res)
  }

  /**
   * An upgrade goes to the running app's own server, where @fastify/http-proxy listens for the
   * upstreams with websocket: true. Without such a listener, Node would have passed the upgrade
   * as a plain request: so does this, and the routes refuse it.
   */
  #upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    const app = this.#app
    if (app.server.listenerCount('upgrade') > 0) {
      app.server.emit('upgrade', req, socket, head)
      return
    }
    const res = new ServerResponse(req)
    res.assignSocket(socket as Socket)
    res.once('finish', () => socket.destroy())
    app.routing(req, res)
  }

  #finished(app: FastifyInstance): void {
    const left = (this.#inflight.get(app) ?? 1) - 1
    this.#inflight.set(app, left)
    if (left === 0) this.#retiring.get(app)?.()
  }

  /** Closes `app` once its requests have finished, or after `boundMs` whatever is left. */
  #retire(app: FastifyInstance, boundMs: number): void {
    let closed = false
    const close = (): void => {
      if (closed) return
      closed = true
      clearTimeout(timer)
      this.#retiring.delete(app)
      this.#inflight.delete(app)
      app.close().catch((err: unknown) => this.#app.log.warn({ err }, 'closing the previous configuration failed'))
    }
    const timer = setTimeout(close, boundMs)
    timer.unref()
    this.#retiring.set(app, close)
    if ((this.#inflight.get(app) ?? 0) === 0) close()
  }

  /** On a worker, the primary watches and tells it (its SIGHUP). */
  #watch(requested: boolean): void {
    const on = requested && this.#options.worker === undefined
    if (on === this.#watching) return
    this.#watching = on
    if (!on) {
      unwatchFile(this.#options.path)
      return
    }
    // Polling by path follows a file that is replaced (an editor's rename, a Kubernetes ConfigMap's symlink swap).
    watchFile(this.#options.path, { interval: WATCH_INTERVAL_MS, persistent: false }, (now, before) => {
      if (now.mtimeMs !== before.mtimeMs || now.size !== before.size || now.ino !== before.ino) void this.reload('file')
    })
  }
}

async function providersReady(app: FastifyInstance): Promise<boolean> {
  return (await app.management.checks.find((check) => check.name === 'provider_metadata')?.ready()) === true
}

/** Resolves when `app`'s providers are discovered; rejects, naming them, after twice the longest provider timeout. */
async function discovered(app: FastifyInstance, config: GatewayConfig): Promise<void> {
  const boundMs = 2 * Math.max(...config.providers.map((p) => p.timeoutMs)) + 1000
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`the providers could not be discovered within ${boundMs} ms (${config.providers.map((p) => p.issuer).join(', ')})`)), boundMs)
  })
  try {
    await Promise.race([app.providerReady, late])
  } finally {
    clearTimeout(timer)
  }
}
