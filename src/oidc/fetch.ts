import type { Tracer } from '@opentelemetry/api'
import type { CustomFetch } from 'openid-client'
import { otelApi } from '../lib/otel.js'
import { failSpan, inSpan } from '../lib/spans.js'

// Every call to the provider goes through this fetch. It settles "is the provider broken?"
// before openid-client parses anything: a redirect, a server error, a success that is not
// JSON, or a body too large to be a token response is the provider's fault (502), so that any
// later parse failure can only come from a malformed token (403). It also bounds how much of a
// hostile response is ever read.

/** Far above any real token, JWKS or discovery document. */
export const MAX_PROVIDER_BODY_BYTES = 1024 * 1024

/** A provider URL as it may be logged: no userinfo, no query string (a request_uri, a hint). */
export function loggableUrl(url: string): string {
  try {
    const u = new URL(url)
    return u.origin + u.pathname
  } catch {
    return '(not a URL)'
  }
}

/** The provider answered, but not like a provider (redirect, 5xx, not JSON, too large). */
export class ProviderFaultError extends Error {
  override readonly name = 'ProviderFaultError'
  /** The call's URL (loggableUrl), when known. */
  readonly url: string | undefined
  readonly status: number | undefined

  constructor(message: string, options: { url?: string; status?: number; cause?: unknown } = {}) {
    super(message, { cause: options.cause })
    this.url = options.url === undefined ? undefined : loggableUrl(options.url)
    this.status = options.status
  }
}

/**
 * The provider could not be reached or did not answer in time. A TypeError, like fetch's own
 * "fetch failed", so openid-client passes it on unchanged; unlike it, it says where and why:
 * `reason` is `timeout`, or the transport's code (ECONNREFUSED, UND_ERR_CONNECT_TIMEOUT,
 * ENOTFOUND, CERT_HAS_EXPIRED, DEPTH_ZERO_SELF_SIGNED_CERT...).
 */
export class ProviderUnreachableError extends TypeError {
  override readonly name = 'ProviderUnreachableError'
  readonly url: string
  readonly reason: string
  /** What `reason` means, in words an operator acts on (transportWords), when it is known. */
  readonly words: string | undefined

  constructor(url: string, cause: unknown) {
    const reason = transportReason(cause)
    const words = transportWords(reason)
    super(`${loggableUrl(url)} could not be reached (${reason}${words === undefined ? '' : `: ${words}`})`, { cause })
    this.url = loggableUrl(url)
    this.reason = reason
    this.words = words
  }
}

/**
 * Transport codes that mean "no TLS server answered the TLS handshake": the issuer says https
 * but the port speaks plain HTTP (or another protocol). OpenSSL reads the first bytes of an HTTP
 * answer as a TLS record header and names the version or length it finds absurd.
 */
const NOT_TLS = new Set([
  'ERR_SSL_WRONG_VERSION_NUMBER',
  'ERR_SSL_PACKET_LENGTH_TOO_LONG',
  'ERR_SSL_HTTP_REQUEST',
  'ERR_SSL_UNKNOWN_PROTOCOL',
  'ERR_SSL_RECORD_LAYER_FAILURE',
  'EPROTO',
])

/** Certificate verification codes (Node's, from OpenSSL's X509_V_ERR_*), by what they mean. */
const CERTIFICATE_WORDS: Readonly<Record<string, string>> = {
  CERT_HAS_EXPIRED: "the provider's TLS certificate has expired",
  CERT_NOT_YET_VALID: "the provider's TLS certificate is not valid yet (is a clock wrong?)",
  ERR_TLS_CERT_ALTNAME_INVALID: "the provider's TLS certificate is for another host name than the issuer's",
  DEPTH_ZERO_SELF_SIGNED_CERT: "the provider's TLS certificate is self-signed: trust it with NODE_EXTRA_CA_CERTS",
  SELF_SIGNED_CERT_IN_CHAIN: "the provider's TLS certificate is signed by an authority the gateway does not trust: add it with NODE_EXTRA_CA_CERTS",
  UNABLE_TO_VERIFY_LEAF_SIGNATURE:
    "the provider's TLS certificate is signed by an authority the gateway does not trust (or the server sends no intermediate certificate): add it with NODE_EXTRA_CA_CERTS",
  UNABLE_TO_GET_ISSUER_CERT: "the provider's TLS certificate is signed by an authority the gateway does not trust: add it with NODE_EXTRA_CA_CERTS",
  UNABLE_TO_GET_ISSUER_CERT_LOCALLY: "the provider's TLS certificate is signed by an authority the gateway does not trust: add it with NODE_EXTRA_CA_CERTS",
  CERT_REVOKED: "the provider's TLS certificate is revoked",
}

/**
 * A transport failure in words, for the log line and the page that says the provider cannot be
 * reached: the code alone (ERR_SSL_WRONG_VERSION_NUMBER) sends an operator to a search engine.
 */
export function transportWords(reason: string): string | undefined {
  if (NOT_TLS.has(reason)) return 'the provider does not speak TLS on that port: is the issuer https:// on a plain http server, or the port wrong?'
  if (Object.hasOwn(CERTIFICATE_WORDS, reason)) return CERTIFICATE_WORDS[reason]
  if (reason === 'ECONNREFUSED') return 'nothing listens on that host and port'
  if (reason === 'ENOTFOUND' || reason === 'EAI_AGAIN') return 'the host name does not resolve'
  if (reason === 'timeout' || reason === 'UND_ERR_CONNECT_TIMEOUT') return 'no answer within provider.timeoutMs'
  return undefined
}

/** `timeout`, `aborted`, or the deepest transport error code of a failed fetch. */
function transportReason(err: unknown): string {
  // fetch's TypeError wraps undici's error, which may wrap the socket's (an AggregateError of
  // each address tried carries the code too). An aborted signal is a DOMException.
  let code: string | undefined
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 4; e = e.cause, depth++) {
    if (e.name === 'TimeoutError') return 'timeout'
    if (e.name === 'AbortError') return 'aborted'
    const own = (e as Error & { code?: unknown }).code
    if (typeof own === 'string') code = own
  }
  if (code !== undefined) return code
  return err instanceof Error ? err.name : 'unknown'
}

/** The body of `res`, refused (ProviderFaultError) once it exceeds `limit` bytes: a hostile answer is never read whole. */
export async function readLimited(res: Response, limit: number): Promise<string> {
  if (res.body === null) return ''
  // A fetch response's body is a byte stream; Node's types leave its chunks `any`.
  const reader: ReadableStreamDefaultReader<Uint8Array> = res.body.getReader()
  const chunks: Uint8Array[] = []
  let size = 0
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    size += value.byteLength
    if (size > limit) {
      await reader.cancel()
      throw new ProviderFaultError(`the response is larger than ${limit} bytes`, { url: res.url, status: res.status })
    }
    chunks.push(value)
  }
  return Buffer.concat(chunks).toString('utf8')
}

export const providerFetch: CustomFetch = async (url, options) => {
  let res: Response
  let body: string
  try {
    res = await fetch(url, options)
    const where = new URL(url).pathname
    const fault = { url, status: res.status }
    if ((res.status >= 300 && res.status < 400) || res.status >= 500) {
      await res.body?.cancel()
      throw new ProviderFaultError(`${where} answered HTTP ${res.status}`, fault)
    }
    body = await readLimited(res, MAX_PROVIDER_BODY_BYTES)
    if (res.status < 300 && body !== '') {
      // OAuth 2.0 (RFC 6749 5.1) and discovery answer application/json; anything else is not an
      // answer we can trust, even if it happens to parse.
      if (!/^application\/([a-z0-9.+-]+\+)?json\s*(;|$)/i.test(res.headers.get('content-type') ?? '')) {
        throw new ProviderFaultError(`${where} answered ${res.headers.get('content-type') ?? 'no content type'}, not JSON`, fault)
      }
      try {
        JSON.parse(body)
      } catch {
        throw new ProviderFaultError(`${where} answered malformed JSON`, fault)
      }
    }
  } catch (err) {
    if (err instanceof ProviderFaultError) throw err
    // Connection refused, DNS, TLS, or the call's deadline (openid-client's, or the caller's).
    throw new ProviderUnreachableError(url, err)
  }
  const copy = new Response(body === '' ? null : body, { status: res.status, statusText: res.statusText, headers: res.headers })
  // A Response built here has no URL; the one openid-client puts in its errors is what the log
  // names as the call that was refused.
  Object.defineProperty(copy, 'url', { value: url })
  if (res.status >= 400) rememberOAuthError(copy, body)
  return copy
}

/** The OAuth error (RFC 6749 5.2) in the body of each 4xx answer, by response. */
const oauthErrors = new WeakMap<Response, { error: string; description: string | undefined }>()

function rememberOAuthError(res: Response, body: string): void {
  try {
    const parsed: unknown = JSON.parse(body)
    if (typeof parsed !== 'object' || parsed === null || !('error' in parsed) || typeof parsed.error !== 'string') return
    const description = 'error_description' in parsed && typeof parsed.error_description === 'string' ? parsed.error_description : undefined
    oauthErrors.set(res, { error: parsed.error, description })
  } catch {
    // Not JSON: no OAuth error to name.
  }
}

/**
 * The OAuth error in the body of a provider's 4xx answer. openid-client does not read the body
 * of a 401 that carries a WWW-Authenticate challenge, though the error is often only there.
 */
export function oauthErrorOf(res: Response): { error: string; description: string | undefined } | undefined {
  return oauthErrors.get(res)
}

/** Told of every provider call: its URL, how long it took and whether it failed. */
export type ProviderCallObserver = (url: string, seconds: number, failed: boolean) => void

/** What a provider call's span says besides HTTP: the provider's name and which endpoint the URL is. */
export interface ProviderCallTracing {
  tracer: Tracer
  provider: string
  callOf(url: string): string
}

/**
 * providerFetch, measured by `observe` (a thrown error or a 5xx is a failure) and, with tracing,
 * in a client span per call. The span carries the endpoint's URL without its query, the grant
 * type of a token request and the status; never a body, a header or a token. No `traceparent` is
 * sent: the provider is often another organization's, and the gateway's trace ids stay its own.
 */
export function observedFetch(observe: ProviderCallObserver | undefined, tracing?: ProviderCallTracing): CustomFetch {
  const measured: CustomFetch =
    observe === undefined
      ? providerFetch
      : async (url, options) => {
          const started = performance.now()
          try {
            const res = await providerFetch(url, options)
            observe(url, (performance.now() - started) / 1000, false)
            return res
          } catch (err) {
            observe(url, (performance.now() - started) / 1000, true)
            throw err
          }
        }
  if (tracing === undefined) return measured
  return (url, options) => {
    const target = new URL(url)
    const method = options.method ?? 'GET'
    const grantType = options.body instanceof URLSearchParams ? options.body.get('grant_type') : null
    const attributes = {
      'http.request.method': method,
      'url.full': target.origin + target.pathname,
      'url.template': target.pathname,
      'server.address': target.hostname,
      'server.port': Number(target.port || (target.protocol === 'https:' ? 443 : 80)),
      'openid_gateway.provider': tracing.provider,
      'openid_gateway.provider.call': tracing.callOf(url),
      ...(grantType === null ? {} : { 'openid_gateway.grant_type': grantType }),
    }
    // HTTP client spans are named `{method} {url.template}`; a provider's endpoints are few and fixed.
    return inSpan(tracing.tracer, `${method} ${target.pathname}`, { kind: otelApi().SpanKind.CLIENT, attributes }, async (span) => {
      const res = await measured(url, options)
      span.setAttribute('http.response.status_code', res.status)
      if (res.status >= 400) failSpan(span, String(res.status))
      return res
    })
  }
}
