import { randomBytes, timingSafeEqual } from 'node:crypto'
import type { FastifyBaseLogger } from 'fastify'
import type { ProviderConfig, SsfConfig } from '../options/types.js'
import { SSF_EVENTS_PATH } from '../contract/endpoints.js'
import { describe } from './errors.js'
import { ProviderFaultError, providerFetch } from './fetch.js'
import { ProviderKeys } from './provider-keys.js'
import { EVENTS_REQUESTED } from './ssf-event.js'
import { isObject, type SetErrorCode } from './ssf-set.js'

// The gateway as a Shared Signals receiver, talking to one transmitter (OpenID Shared Signals
// Framework 1.0):
// - its configuration metadata (7.1, 7.2): at ssf.configurationUrl, by default
//   `/.well-known/ssf-configuration` inserted between the issuer's host and path; the `issuer` it
//   states must be the one that URL derives from (7.2.1), or anyone able to serve a file there
//   could name another issuer's events as theirs;
// - its keys: `jwks_uri`, through ProviderKeys (provider-keys.ts: the same refetch and rate-limit rules as
//   the provider's own keys);
// - its stream (8.1.1): read at the configuration_endpoint, created there when there is none
//   with the delivery the gateway wants (push: RFC 8935 `urn:ietf:rfc:8935` with the gateway's
//   endpoint_url and `authorization_header`; poll: `urn:ietf:rfc:8936`, endpoint_url chosen by the
//   transmitter) and the CAEP events it acts on; its status (8.1.2) and verification (8.1.4): the
//   gateway asks for a verification event with a random `state` and checks the one it receives;
// - poll delivery (RFC 8936 2.4): acknowledges the jti of every SET it processed and reports
//   `setErrs` for those it refused.
// Management calls carry ssf.bearerToken (SSF 1.0 8: the receiver authenticates with an OAuth
// access token). A transmitter that cannot be reached never stops the gateway: SsfStreams retries.

export const PUSH_METHOD = 'urn:ietf:rfc:8935'
export const POLL_METHOD = 'urn:ietf:rfc:8936'
/** SETs asked for per poll (RFC 8936 2.4 maxEvents). */
export const POLL_MAX_EVENTS = 25

export interface TransmitterMetadata {
  issuer: string
  jwksUri: string
  configurationEndpoint: string | undefined
  statusEndpoint: string | undefined
  verificationEndpoint: string | undefined
}

/** What is known of the stream, for /readyz and the log. */
export interface StreamStatus {
  /** The configuration metadata and keys were read. */
  reachable: boolean
  streamId: string | undefined
  /** `enabled`, `paused` or `disabled` (SSF 1.0 8.1.2), as last read. */
  status: string | undefined
  /** The last verification: requested and not yet answered, answered with our state, or never asked. */
  verification: 'none' | 'pending' | 'verified'
  /** Why the last management call failed, if it did. */
  error: string | undefined
}

/** A SET delivered by poll, judged: undefined when accepted (acknowledged), else its RFC 8935 code. */
export type SetVerdict = { code: SetErrorCode; description: string } | undefined

/** The well-known configuration URL of an issuer (SSF 1.0 7.2: the suffix goes before the path). */
export function wellKnownOf(issuer: string): string {
  const url = new URL(issuer)
  const path = url.pathname === '/' ? '' : url.pathname.replace(/\/$/, '')
  return `${url.origin}/.well-known/ssf-configuration${path}`
}

function optionalUrl(doc: Record<string, unknown>, name: string): string | undefined {
  const value = doc[name]
  return typeof value === 'string' && value !== '' ? value : undefined
}

/** SSF 1.0 7.1 metadata: issuer and jwks_uri are required; the issuer must derive `url`. */
export function parseMetadata(doc: unknown, url: string): TransmitterMetadata {
  if (!isObject(doc)) throw new ProviderFaultError('the SSF configuration is not a JSON object', { url })
  const issuer = optionalUrl(doc, 'issuer')
  const jwksUri = optionalUrl(doc, 'jwks_uri')
  if (issuer === undefined || jwksUri === undefined) throw new ProviderFaultError('the SSF configuration lacks issuer or jwks_uri', { url })
  if (wellKnownOf(issuer) !== url) throw new ProviderFaultError(`the SSF configuration's issuer ${issuer} is not the one its URL derives from`, { url })
  return {
    issuer,
    jwksUri,
    configurationEndpoint: optionalUrl(doc, 'configuration_endpoint'),
    statusEndpoint: optionalUrl(doc, 'status_endpoint'),
    verificationEndpoint: optionalUrl(doc, 'verification_endpoint'),
  }
}

export interface TransmitterOptions {
  /** The provider this transmitter belongs to (its sessions are the ones its events name). */
  provider: string
  /** The provider's issuer: the default configuration URL derives from it. */
  providerIssuer: string
  clientId: string
  ssf: SsfConfig
  /** Where the transmitter pushes: publicUrl + /api/v1/openid/ssf/events. */
  pushUrl: string
  timeoutMs: number
  clockToleranceSeconds: number
  log: Pick<FastifyBaseLogger, 'info' | 'warn' | 'debug'>
}

export class SsfTransmitter {
  readonly provider: string
  readonly config: SsfConfig
  readonly audience: string
  readonly clockToleranceSeconds: number
  readonly keys: ProviderKeys
  readonly #url: string
  readonly #pushUrl: string
  readonly #timeoutMs: number
  readonly #log: TransmitterOptions['log']
  #metadata: TransmitterMetadata | undefined
  #pollUrl: string | undefined
  #expectedState: string | undefined
  /** Acknowledgements and errors not yet reported to the transmitter (sent with the next poll). */
  #acks: string[] = []
  #setErrs: Record<string, { err: SetErrorCode; description: string }> = {}
  readonly status: StreamStatus = { reachable: false, streamId: undefined, status: undefined, verification: 'none', error: undefined }

  constructor(options: TransmitterOptions) {
    this.provider = options.provider
    this.config = options.ssf
    this.audience = options.ssf.audience ?? options.clientId
    this.clockToleranceSeconds = options.clockToleranceSeconds
    this.#url = options.ssf.configurationUrl ?? wellKnownOf(options.providerIssuer)
    this.#pushUrl = options.pushUrl
    this.#timeoutMs = options.timeoutMs
    this.#log = options.log
    this.keys = new ProviderKeys({ timeoutMs: options.timeoutMs, log: options.log })
  }

  /** The transmitter's issuer, once its metadata is read. */
  get issuer(): string | undefined {
    return this.#metadata?.issuer
  }

  /** Whether the gateway is ready as far as this stream goes (ssf.required). */
  get healthy(): boolean {
    return this.status.reachable && this.status.status === 'enabled'
  }

  /** Reads the metadata and keys; throws when the transmitter cannot be reached or is not one. */
  async load(): Promise<TransmitterMetadata> {
    const metadata = parseMetadata(await this.#json('GET', this.#url, undefined, false), this.#url)
    await this.keys.load(new URL(metadata.jwksUri))
    this.#metadata = metadata
    this.status.reachable = true
    return metadata
  }

  /** Reads the stream, or creates it; then reads its status. */
  async ensureStream(): Promise<void> {
    const metadata = this.#metadata ?? (await this.load())
    const endpoint = metadata.configurationEndpoint
    if (endpoint === undefined) {
      // A transmitter without stream management has its streams set up by hand: only push works.
      this.status.status = 'enabled'
      return
    }
    const method = this.config.delivery === 'push' ? PUSH_METHOD : POLL_METHOD
    const existing = await this.#json('GET', endpoint, undefined, true)
    // 8.1.1.2: one stream, or (without stream_id) every stream of this receiver.
    const streams = (Array.isArray(existing) ? existing : [existing]).filter(isObject)
    let stream = streams.find((s) => isObject(s.delivery) && s.delivery.method === method)
    if (stream === undefined) {
      const delivery = this.config.delivery === 'push' ? { method, endpoint_url: this.#pushUrl, authorization_header: this.config.authorization } : { method }
      const created = await this.#json('POST', endpoint, { delivery, events_requested: EVENTS_REQUESTED, description: 'openid-gateway' }, true)
      if (!isObject(created)) throw new ProviderFaultError('the stream created is not a JSON object', { url: endpoint })
      stream = created
      this.#log.info({ provider: this.provider, stream: stream.stream_id }, 'shared signals stream created')
    }
    const streamId = typeof stream.stream_id === 'string' ? stream.stream_id : undefined
    if (streamId === undefined) throw new ProviderFaultError('the stream has no stream_id', { url: endpoint })
    this.status.streamId = streamId
    if (isObject(stream.delivery) && typeof stream.delivery.endpoint_url === 'string') this.#pollUrl = stream.delivery.endpoint_url
    await this.readStatus()
  }

  /** SSF 1.0 8.1.2: the stream's status; without a status endpoint a stream that exists counts as enabled. */
  async readStatus(): Promise<void> {
    const endpoint = this.#metadata?.statusEndpoint
    const streamId = this.status.streamId
    if (endpoint === undefined || streamId === undefined) {
      this.status.status = streamId === undefined ? this.status.status : 'enabled'
      return
    }
    const url = new URL(endpoint)
    url.searchParams.set('stream_id', streamId)
    const answer = await this.#json('GET', url.href, undefined, true)
    this.status.status = isObject(answer) && typeof answer.status === 'string' ? answer.status : undefined
  }

  /** SSF 1.0 8.1.4.2: asks for a verification event carrying a fresh random state. */
  async requestVerification(): Promise<void> {
    const endpoint = this.#metadata?.verificationEndpoint
    const streamId = this.status.streamId
    if (endpoint === undefined || streamId === undefined) return
    const state = randomBytes(16).toString('base64url')
    this.#expectedState = state
    this.status.verification = 'pending'
    await this.#json('POST', endpoint, { stream_id: streamId, state }, true, true)
  }

  /** A verification event arrived: verified when it carries the state asked for (a stale or forged one is not). */
  verified(state: string | undefined): boolean {
    const expected = this.#expectedState
    if (expected === undefined || state === undefined) return false
    const a = Buffer.from(state)
    const b = Buffer.from(expected)
    if (a.length !== b.length || !timingSafeEqual(a, b)) return false
    this.status.verification = 'verified'
    this.#expectedState = undefined
    return true
  }

  /**
   * One RFC 8936 poll: reports what the previous one processed (ack, setErrs), judges each SET
   * received with `judge`, and keeps the verdicts for the next. Resolves whether more are available.
   */
  async poll(judge: (token: string) => Promise<SetVerdict>): Promise<boolean> {
    const url = this.#pollUrl
    if (url === undefined) throw new ProviderFaultError('the stream has no poll endpoint_url', { url: this.#url })
    const acks = this.#acks
    const setErrs = this.#setErrs
    const answer = await this.#json('POST', url, { ack: acks, setErrs, maxEvents: POLL_MAX_EVENTS, returnImmediately: true }, true)
    // Reported: not sent again (RFC 8936 2.4.1: a jti is acknowledged once).
    this.#acks = []
    this.#setErrs = {}
    if (!isObject(answer) || !isObject(answer.sets)) throw new ProviderFaultError('the poll answer has no sets object', { url })
    for (const [jti, token] of Object.entries(answer.sets)) {
      if (typeof token !== 'string') {
        this.#setErrs[jti] = { err: 'invalid_request', description: 'not a SET' }
        continue
      }
      const verdict = await judge(token)
      if (verdict === undefined) this.#acks.push(jti)
      else this.#setErrs[jti] = { err: verdict.code, description: verdict.description }
    }
    return answer.moreAvailable === true
  }

  /** Whether acknowledgements are waiting to be sent (a last poll before stopping). */
  get owesReport(): boolean {
    return this.#acks.length > 0 || Object.keys(this.#setErrs).length > 0
  }

  async #json(method: 'GET' | 'POST', url: string, body: unknown, authorized: boolean, noContent = false): Promise<unknown> {
    const headers: Record<string, string> = { accept: 'application/json' }
    if (body !== undefined) headers['content-type'] = 'application/json'
    if (authorized && this.config.bearerToken !== undefined) headers.authorization = `Bearer ${this.config.bearerToken}`
    const res = await providerFetch(url, {
      method,
      headers,
      redirect: 'manual',
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(this.#timeoutMs),
    })
    const ok = res.status === 200 || res.status === 201 || (noContent && (res.status === 202 || res.status === 204))
    if (!ok) {
      await res.body?.cancel()
      throw new ProviderFaultError(`${new URL(url).pathname} answered HTTP ${res.status}`, { url, status: res.status })
    }
    if (noContent) {
      await res.body?.cancel()
      return undefined
    }
    return res.json()
  }

  /** A management failure, for the status and the log. */
  failed(err: unknown): Record<string, unknown> {
    const fields = describe(err)
    this.status.error = err instanceof Error ? err.message : String(err)
    return fields
  }
}

/**
 * One configuration's Shared Signals transmitters: one per provider with `ssf`, pushing (with
 * delivery: push) to the gateway's events endpoint under `publicUrl`. The process's loops
 * (ssf-streams.ts) run them once that configuration serves.
 */
export function createTransmitters(providers: readonly ProviderConfig[], publicUrl: string, log: TransmitterOptions['log']): SsfTransmitter[] {
  const pushUrl = new URL(SSF_EVENTS_PATH, publicUrl).href
  return providers.flatMap((p) =>
    p.ssf === undefined
      ? []
      : [
          new SsfTransmitter({
            provider: p.name,
            providerIssuer: p.issuer,
            clientId: p.clientId,
            ssf: p.ssf,
            pushUrl,
            timeoutMs: p.timeoutMs,
            clockToleranceSeconds: p.clockToleranceSeconds,
            log,
          }),
        ],
  )
}
