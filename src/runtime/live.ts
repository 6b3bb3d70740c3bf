import { createHash } from 'node:crypto'
import { readFile, stat } from 'node:fs/promises'
import { createServer, ServerResponse, type IncomingMessage, type Server } from 'node:http'
import type { Server as NetServer, Socket } from 'node:net'
import type { Duplex } from 'node:stream'
import type { FastifyBaseLogger, FastifyInstance } from 'fastify'
import { buildApp, MAX_HEADER_BYTES, type GatewayApp } from '../app/app.js'
import { ConfigError, loadConfigFile, loadConfigText, type ConfigState, type LoadedConfig } from '../config/load.js'
import { loosenedKeys } from '../config/loosening.js'
import type { GatewayConfig } from '../options/types.js'
import { clientErrorHandler } from '../ops/client-errors.js'
import { systemClock, type Clock } from '../lib/clock.js'
import type { ReadinessProbe } from '../ops/management.js'
import { createProcessState, type OwnedProcessState, type ProcessStateOptions } from './process-state.js'

// Live reload: the gateway behind one listening server, whose configuration can be replaced while
// it runs (SIGHUP, or a change of the file with server.watchConfig). The new file is read and
// validated in full and a whole new app is built from it (routes, rules, providers, cookie
// secrets, keys); only once it is ready, providers discovered, does the server hand it the next
// request. Requests under way finish on the app they started on, which is closed once they have
// (at most server.shutdownTimeoutMs later); proxied WebSockets stay open. What outlives one
// configuration (sessions of the memory store, the revocation list, the logout-token replay guard,
// refreshes under way, the metrics) is carried from app to app (runtime/process-state.ts). A file that
// fails anything keeps the running configuration, and the log names every problem by key.

/**
 * Keys a reload cannot change: the listeners and processes, and where the state that outlives a
 * configuration lives. A reload that changes one is refused, saying so (restart instead).
 */
export const RESTART_KEYS = [
  'server.host',
  'server.port',
  'server.managementHost',
  'server.managementPort',
  'server.workers',
  'server.extAuthzGrpcPort',
  'session.store',
  'session.redisUrl',
  'session.redis',
  'session.maxAgeSeconds',
  'session.memory',
  'telemetry.tracing',
] as const

/** How often Node's server looks for requests past server.requestTimeoutMs. */
const CONNECTIONS_CHECK_MS = 1000
/** Node's default time for the headers; never longer than the whole request's. */
const HEADERS_TIMEOUT_MS = 60_000

/** How often a watched file is looked at (server.watchConfig). */
export const WATCH_INTERVAL_MS = 2000
/**
 * How long a watched file that removes access rules must have stayed unchanged before it is
 * loaded (ConfigWatcher): a writer that truncates the file, pauses, then writes the rest leaves a
 * file that may be valid and open what the rest closes.
 */
export const LOOSENING_QUIET_MS = 30_000

export interface LiveOptions extends ProcessStateOptions {
  /** The configuration file, read again on every reload. */
  path: string
  env?: NodeJS.ProcessEnv
  /**
   * A socket already listening on server.host and server.port, which listen() takes over instead
   * of binding them (Node's server.listen(handle)); closing the gateway closes it. For a gateway
   * started in the process of its tests (test/fixtures/stack.ts): its port is in publicUrl, so it
   * is reserved before the configuration is written, and released and bound again it could be
   * taken by another process meanwhile. The CLI binds the configured address.
   */
  listening?: NetServer
}

export type ReloadTrigger = 'SIGHUP' | 'file' | 'primary'

/** Why a reload keeps the running configuration: each problem by key, and the kind of refusal. */
export interface Refusal {
  problems: string[]
  reason: string
}

/**
 * The file loaded for a reload of `running` (read at `path`, or its `text` as the primary read
 * it), or why it cannot replace it (invalid, or a key that takes a restart).
 */
export function loadForReload(path: string, env: NodeJS.ProcessEnv | undefined, running: GatewayConfig, text?: string): LoadedConfig | Refusal {
  let loaded: LoadedConfig
  try {
    loaded = text === undefined ? loadConfigFile(path, env) : loadConfigText(text, path, env)
  } catch (err) {
    if (err instanceof ConfigError) return { problems: err.issues, reason: 'invalid file' }
    throw err
  }
  const changed = RESTART_KEYS.filter((key) => JSON.stringify(valueAt(running, key)) !== JSON.stringify(valueAt(loaded.config, key)))
  if (changed.length > 0) return { problems: changed.map((key) => `${key}: changed, which takes a restart`), reason: 'keys that take a restart' }
  return loaded
}

/**
 * The watcher's judge (ConfigWatcher `loosens`): the access rules the file's `text` would remove
 * from `running`, said once at warn while the watcher waits for the file to settle. A file that
 * does not load removes nothing here: its reload is refused anyway, naming its problems.
 */
export function watchedLoosening(
  log: () => Pick<FastifyBaseLogger, 'warn'>,
  path: string,
  env: NodeJS.ProcessEnv | undefined,
  running: () => GatewayConfig,
): (text: string) => boolean {
  return (text) => {
    let keys: string[]
    try {
      const next = loadForReload(path, env, running(), text)
      keys = 'config' in next ? loosenedKeys(running(), next.config) : []
    } catch {
      // Never fail open: a file that cannot be judged waits as a loosening one does.
      keys = ['(the file could not be compared with the running configuration)']
    }
    if (keys.length === 0) return false
    log().warn(
      { trigger: 'file', keys, quietMs: LOOSENING_QUIET_MS },
      'the changed file removes access rules: it is loaded once unchanged for quietMs (SIGHUP loads it now)',
    )
    return true
  }
}

/** A reload that removes access rules is said at warn, with their keys (config/loosening.ts). */
export function warnLoosening(log: Pick<FastifyBaseLogger, 'warn'>, trigger: ReloadTrigger, before: GatewayConfig, after: GatewayConfig): void {
  const keys = loosenedKeys(before, after)
  if (keys.length > 0) log.warn({ trigger, keys }, 'the new configuration removes access rules')
}

/** One `configuration problem` line per problem, then the refusal. */
export function logRefusal(log: Pick<FastifyBaseLogger, 'error'>, trigger: ReloadTrigger, refusal: Refusal, running: ConfigState): void {
  for (const problem of refusal.problems) log.error({ trigger, problem }, 'configuration problem')
  log.error(
    { trigger, problems: refusal.problems.length, config: running.hash },
    `configuration reload refused (${refusal.reason}): the running configuration is kept`,
  )
}

function valueAt(config: GatewayConfig, key: string): unknown {
  return key.split('.').reduce<unknown>((node, part) => (node as Record<string, unknown> | undefined)?.[part], config)
}

/** What the watcher compares from one look at the file to the next. */
interface FileSnapshot {
  size: number
  mtimeMs: number
  ino: number
  sha256: string
  text: string
}

/** A change seen and not loaded yet: when it was first seen as it is, and whether it loosens access. */
interface PendingChange extends FileSnapshot {
  since: number
  loosens?: boolean
}

export interface WatchOptions {
  /** How often the timer looks (default WATCH_INTERVAL_MS). */
  intervalMs?: number
  /** What the quiet period of a loosening change is measured on (default the system's). */
  clock?: Clock
  /**
   * Whether a changed file's text removes access rules from the running configuration
   * (watchedLoosening); such a change waits for LOOSENING_QUIET_MS. Default: none does.
   */
  loosens?: (text: string) => boolean
}

function sameFile(a: FileSnapshot | undefined, b: FileSnapshot | undefined): boolean {
  return a !== undefined && b !== undefined && a.size === b.size && a.mtimeMs === b.mtimeMs && a.ino === b.ino && a.sha256 === b.sha256
}

/**
 * Calls `changed` with the file's text when the file at `path` has changed (server.watchConfig)
 * and then stayed the same for one more look: size, mtime, inode and SHA-256 of the content equal
 * across two consecutive looks. A file written in place in several steps is otherwise read
 * halfway: valid YAML that lacks what the next write adds (an `allow` rule) would be served until
 * the next look. A writer may also pause longer than a look between its steps (truncate, then
 * write): a change that removes access rules (`loosens`) is therefore loaded only once it has
 * stayed the same for LOOSENING_QUIET_MS on the watcher's clock, and one that does not is loaded
 * as before (a half file that adds no opening can only refuse more, or fail to load). The text
 * handed over is the one judged, never read again. Looking by path follows a file that is
 * replaced (an editor's rename, a Kubernetes ConfigMap's symlink swap). A file that cannot be
 * read is looked at again later; the reload reports it.
 */
export class ConfigWatcher {
  readonly #path: string
  readonly #changed: (text: string) => void
  readonly #intervalMs: number
  readonly #clock: Clock
  readonly #loosens: (text: string) => boolean
  #timer: NodeJS.Timeout | undefined
  /** The file as it was when last loaded (or when the watch began). */
  #loaded: FileSnapshot | undefined
  /** The last look, different from #loaded: waiting to see it once more (or for its quiet period). */
  #pending: PendingChange | undefined
  /** The look under way and those queued behind it. */
  #looks: Promise<void> = Promise.resolve()
  #queued = 0

  constructor(path: string, changed: (text: string) => void, options: WatchOptions = {}) {
    this.#path = path
    this.#changed = changed
    this.#intervalMs = options.intervalMs ?? WATCH_INTERVAL_MS
    this.#clock = options.clock ?? systemClock
    this.#loosens = options.loosens ?? (() => false)
  }

  /** The next look takes the file as it is then as the loaded one (after a reload by other means). */
  rebase(): void {
    this.#loaded = undefined
    this.#pending = undefined
  }

  set(on: boolean): void {
    if (on === (this.#timer !== undefined)) return
    if (!on) {
      clearInterval(this.#timer)
      this.#timer = undefined
      return
    }
    this.#loaded = undefined
    this.#pending = undefined
    // A slow disk does not pile looks up: the timer skips a turn while one is under way.
    this.#timer = setInterval(() => {
      if (this.#queued === 0) void this.look()
    }, this.#intervalMs)
    this.#timer.unref()
    void this.look()
  }

  /**
   * One look at the file, after any under way (the timer's; tests call it to look at a moment of
   * their choosing).
   */
  look(): Promise<void> {
    this.#queued++
    this.#looks = this.#looks.then(() => this.#lookOnce()).finally(() => this.#queued--)
    return this.#looks
  }

  async #lookOnce(): Promise<void> {
    const now = await snapshot(this.#path)
    if (this.#loaded === undefined) {
      this.#loaded = now
      return
    }
    // Touched or replaced with the same content: nothing to load.
    if (now === undefined || (now.size === this.#loaded?.size && now.sha256 === this.#loaded.sha256)) {
      this.#pending = undefined
      return
    }
    const pending = this.#pending
    if (pending === undefined || !sameFile(now, pending)) {
      this.#pending = { ...now, since: this.#clock.now() }
      return
    }
    // Judged once per change, after it has held for a look (a file midway is not judged).
    pending.loosens ??= this.#loosens(pending.text)
    if (!settled(pending, this.#clock.now())) return
    this.#loaded = now
    this.#pending = undefined
    if (this.#timer !== undefined) this.#changed(now.text)
  }
}

/**
 * Whether a change that has held for a look may be loaded: at once, unless it removes access
 * rules; then only once unchanged for LOOSENING_QUIET_MS since it was first seen as it is.
 */
export function settled(change: { since: number; loosens?: boolean }, now: number): boolean {
  return change.loosens !== true || now - change.since >= LOOSENING_QUIET_MS
}

async function snapshot(path: string): Promise<FileSnapshot | undefined> {
  try {
    const [stats, content] = await Promise.all([stat(path), readFile(path)])
    return {
      size: stats.size,
      mtimeMs: stats.mtimeMs,
      ino: stats.ino,
      sha256: createHash('sha256').update(content).digest('hex'),
      text: content.toString('utf8'),
    }
  } catch {
    return undefined
  }
}

/** One configuration's app, and its requests under way (closed once none is left). */
class Generation {
  inflight = 0
  #idle: (() => void) | undefined
  /** The app's HTTP side, which the server hands requests and upgrades to. */
  readonly http: FastifyInstance

  constructor(
    readonly app: GatewayApp,
    readonly loaded: LoadedConfig,
  ) {
    this.http = app.http
  }

  /** Bound once: the `close` listener of every request, without a closure per request. */
  readonly end = (): void => {
    if (--this.inflight === 0) this.#idle?.()
  }

  /** Resolves once no request is under way, or after `boundMs` whatever is left. */
  idle(boundMs: number): Promise<void> {
    if (this.inflight === 0) return Promise.resolve()
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, boundMs)
      timer.unref()
      this.#idle = () => {
        clearTimeout(timer)
        resolve()
      }
    })
  }
}

export class LiveGateway {
  readonly server: Server
  readonly #options: LiveOptions
  /** What every configuration's app of this process shares (runtime/process-state.ts). */
  readonly #state: OwnedProcessState
  #current: Generation
  /** Closing apps of earlier configurations, awaited by close(). */
  readonly #retiring = new Set<Promise<void>>()
  readonly #watcher: ConfigWatcher
  #queue: Promise<unknown> = Promise.resolve()
  /** A configuration built by prepare(), waiting for commit() or abort(). */
  #prepared: Generation | undefined

  private constructor(options: LiveOptions, state: OwnedProcessState, current: Generation) {
    this.#options = options
    this.#state = state
    this.#current = current
    // As Fastify configures its own server (its defaults), with the gateway's header limit.
    // Node looks for requests past their time every connectionsCheckingInterval (30 s by default,
    // which would double a short server.requestTimeoutMs).
    this.server = createServer({ maxHeaderSize: MAX_HEADER_BYTES, connectionsCheckingInterval: CONNECTIONS_CHECK_MS }, (req, res) => this.#request(req, res))
    this.server.keepAliveTimeout = 72_000
    this.server.on('clientError', (err: Error & { code?: string }, socket: Socket) => clientErrorHandler.call(this.#current.http, err, socket))
    this.server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => this.#upgrade(req, socket, head))
    this.#watcher = new ConfigWatcher(options.path, (text) => void this.reload('file', text), {
      clock: state.clock,
      loosens: watchedLoosening(
        () => this.log,
        options.path,
        options.env,
        () => this.config,
      ),
    })
    this.#loaded(current.loaded)
    state.websockets.use(current.app.websocketVerdict)
    void state.ssf.use(current.app.sharedSignals)
  }

  /** Builds the first app from `loaded` (loadConfigFile of `options.path`). */
  static async start(options: LiveOptions, loaded: LoadedConfig = loadConfigFile(options.path, options.env)): Promise<LiveGateway> {
    const state = await createProcessState(loaded.config, options)
    try {
      const app = await buildApp(loaded.config, { logStream: options.logStream, state, live: true })
      await app.http.ready()
      return new LiveGateway(options, state, new Generation(app, loaded))
    } catch (err) {
      await state.close()
      throw err
    }
  }

  /** The app serving new requests. */
  get app(): GatewayApp {
    return this.#current.app
  }

  /** The logger of the app serving new requests. */
  get log(): FastifyBaseLogger {
    return this.#current.http.log
  }

  get config(): GatewayConfig {
    return this.#current.loaded.config
  }

  get state(): ConfigState {
    return this.#current.loaded.state
  }

  /**
   * The readiness probes of the running app, each looked up when it is asked (their names do not change
   * with a reload: they follow session.store and session.redisUrl, which need a restart).
   */
  get probes(): ReadinessProbe[] {
    return this.app.management.probes.map((probe) => ({
      name: probe.name,
      ready: () => this.app.management.probes.find((p) => p.name === probe.name)?.ready() ?? false,
      detail: () => this.app.management.probes.find((p) => p.name === probe.name)?.detail?.(),
    }))
  }

  async listen(): Promise<string> {
    const { host, port } = this.config.server
    const { listening } = this.#options
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject)
      const listened = (): void => {
        this.server.off('error', reject)
        resolve()
      }
      if (listening === undefined) this.server.listen({ host, port }, listened)
      else this.server.listen(listening, listened)
    })
    const address = this.server.address()
    const where =
      typeof address === 'string' || address === null
        ? String(address)
        : `http://${address.family === 'IPv6' ? `[${address.address}]` : address.address}:${address.port}`
    this.log.info({ address: where, config: this.state.hash }, 'listening')
    return where
  }

  /**
   * Loads the file again (or `text`, the file as the watcher judged it) and, when it is valid in
   * full and its app is ready, swaps it in; true when it did. Reloads run one after the other.
   */
  reload(trigger: ReloadTrigger, text?: string): Promise<boolean> {
    const run = this.#queue.then(() => this.#reload(trigger, text))
    this.#queue = run.catch(() => undefined)
    return run
  }

  /**
   * Stops accepting connections and waits for requests under way (cut after `boundMs`), then
   * closes every app. Proxied WebSockets are closed at once: they are no requests that end, and
   * the server counts their connections until they close, which neither its close() nor
   * closeAllConnections() does (the drain would never end); their clients reconnect elsewhere.
   */
  async close(boundMs: number): Promise<void> {
    this.#watcher.set(false)
    this.#state.websockets.closeAll()
    const bound = setTimeout(() => {
      this.log.warn('shutdown timeout reached: closing the remaining connections')
      this.server.closeAllConnections()
    }, boundMs)
    bound.unref()
    await new Promise<void>((resolve) => this.server.close(() => resolve()))
    clearTimeout(bound)
    await this.#discard()
    await Promise.all([...this.#retiring, this.app.close()])
    await this.#state.close()
  }

  async #reload(trigger: ReloadTrigger, text?: string): Promise<boolean> {
    const prepared = await this.#prepare(trigger, text)
    if (!(prepared instanceof Generation)) return this.#refuse(trigger, prepared)
    this.#commit(trigger, prepared)
    return true
  }

  /**
   * The first phase of a reload in step with other processes (server.workers): builds the app of
   * `text` (the file as the primary read it) and keeps it, unserved, until commit() or abort().
   * Resolves with the refusal when it cannot start, which is then already undone.
   */
  prepare(text: string, trigger: ReloadTrigger = 'primary'): Promise<Refusal | undefined> {
    const run = this.#queue.then(async () => {
      await this.#discard()
      const prepared = await this.#prepare(trigger, text)
      if (!(prepared instanceof Generation)) return prepared
      this.#prepared = prepared
      return undefined
    })
    this.#queue = run.catch(() => undefined)
    return run
  }

  /** The second phase: serves the prepared app (a no-op when none is, or it is for another file). */
  commit(hash: string, trigger: ReloadTrigger = 'primary'): Promise<boolean> {
    const run = this.#queue.then(() => {
      const prepared = this.#prepared
      if (prepared === undefined || prepared.loaded.state.hash !== hash) return false
      this.#prepared = undefined
      this.#commit(trigger, prepared)
      return true
    })
    this.#queue = run.catch(() => undefined)
    return run
  }

  /**
   * The second phase when the reload was refused (by the primary, or by a worker): the running
   * configuration stays. The primary has logged the problems; this counts the failure and says so.
   */
  abort(refusal: Refusal, trigger: ReloadTrigger = 'primary'): Promise<void> {
    const run = this.#queue.then(async () => {
      await this.#discard()
      this.log.error(
        { trigger, reason: refusal.reason, problems: refusal.problems.length, config: this.state.hash },
        'configuration reload refused: the running configuration is kept',
      )
      this.#state.metrics.observeReload('failure')
    })
    this.#queue = run.catch(() => undefined)
    return run
  }

  async #discard(): Promise<void> {
    const prepared = this.#prepared
    this.#prepared = undefined
    await prepared?.app.close().catch(() => undefined)
  }

  #refuse(trigger: ReloadTrigger, refusal: Refusal): false {
    logRefusal(this.log, trigger, refusal, this.state)
    this.#state.metrics.observeReload('failure')
    return false
  }

  /** The next configuration's app, ready to serve, or why it cannot be (its app closed again). */
  async #prepare(trigger: ReloadTrigger, text?: string): Promise<Generation | Refusal> {
    const loaded = loadForReload(this.#options.path, this.#options.env, this.config, text)
    if (!('config' in loaded)) return loaded
    let next: GatewayApp | undefined
    try {
      next = await buildApp(loaded.config, { logStream: this.#options.logStream, state: this.#state, live: true })
      await next.http.ready()
      // A reload never turns a gateway whose providers are discovered into one whose are not.
      const undiscovered = await discovered(next, loaded.config).then(
        () => undefined,
        (err: unknown) => (err instanceof Error ? err : new Error(String(err))),
      )
      if (undiscovered !== undefined && (await providersReady(this.app))) throw undiscovered
    } catch (err) {
      await next?.close().catch(() => undefined)
      const problems = err instanceof ConfigError ? err.issues : [err instanceof Error ? err.message : String(err)]
      return { problems, reason: 'the new configuration cannot start' }
    }
    next.http.log.debug({ trigger, config: loaded.state.hash }, 'configuration prepared')
    return new Generation(next, loaded)
  }

  #commit(trigger: ReloadTrigger, next: Generation): void {
    warnLoosening(next.http.log, trigger, this.config, next.loaded.config)
    const previous = this.#current
    this.#current = next
    this.#loaded(next.loaded)
    this.#state.metrics.observeReload('success')
    // Open WebSockets are asked again: those the new configuration refuses close (1008).
    this.#state.websockets.use(next.app.websocketVerdict)
    void this.#state.websockets.recheck()
    // The previous configuration's Shared Signals loops stop before this one's start: one poller.
    void this.#state.ssf.use(next.app.sharedSignals)
    this.#retire(previous)
    next.http.log.info({ trigger, config: next.loaded.state.hash }, 'configuration reloaded')
  }

  /** What follows the running configuration: the metrics of its file, and the watch of it (on a worker, the primary watches). */
  #loaded({ config, state }: LoadedConfig): void {
    // A client that trickles its request (headers or body) holds a connection at most this long:
    // 408 and the connection closed. Upgraded (WebSocket) connections are no longer requests.
    this.server.requestTimeout = config.server.requestTimeoutMs
    this.server.headersTimeout = Math.min(config.server.requestTimeoutMs, HEADERS_TIMEOUT_MS)
    this.#state.metrics.configLoaded(state.hash, new Date(state.loadedAt))
    this.#watcher.set(config.server.watchConfig && this.#options.worker === undefined)
    // The file as loaded now is the one later looks compare with (a SIGHUP's reload included).
    this.#watcher.rebase()
  }

  #request(req: IncomingMessage, res: ServerResponse): void {
    const current = this.#current
    current.inflight++
    res.once('close', current.end)
    current.http.routing(req, res)
  }

  /**
   * An upgrade goes to the running app's own server, where @fastify/http-proxy listens for the
   * upstreams with websocket: true. Without such a listener, Node would have passed the upgrade
   * as a plain request: so does this, and the routes refuse it.
   */
  #upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    const { http } = this.#current
    if (http.server.listenerCount('upgrade') > 0) {
      http.server.emit('upgrade', req, socket, head)
      return
    }
    const res = new ServerResponse(req)
    res.assignSocket(socket as Socket)
    res.once('finish', () => socket.destroy())
    http.routing(req, res)
  }

  /** Closes an earlier configuration's app once its requests have finished (at most its shutdownTimeoutMs). */
  #retire(previous: Generation): void {
    const closing = previous
      .idle(previous.loaded.config.server.shutdownTimeoutMs)
      .then(() => previous.app.close())
      .then(() => previous.http.log.debug({ config: previous.loaded.state.hash }, 'previous configuration closed'))
      .catch((err: unknown) => this.log.warn({ err }, 'closing the previous configuration failed'))
      .finally(() => this.#retiring.delete(closing))
    this.#retiring.add(closing)
  }
}

async function providersReady(app: GatewayApp): Promise<boolean> {
  return (await app.management.probes.find((probe) => probe.name === 'provider_metadata')?.ready()) === true
}

/** Resolves when `app`'s providers are discovered; rejects, naming them, after twice the longest provider timeout. */
async function discovered(app: GatewayApp, config: GatewayConfig): Promise<void> {
  const boundMs = 2 * Math.max(...config.providers.map((p) => p.timeoutMs)) + 1000
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`the providers could not be discovered within ${boundMs} ms (${config.providers.map((p) => p.issuer).join(', ')})`)),
      boundMs,
    )
  })
  try {
    await Promise.race([app.providersReady, late])
  } finally {
    clearTimeout(timer)
  }
}
