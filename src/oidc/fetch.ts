import { SpanKind, type Tracer } from '@opentelemetry/api'
import type { CustomFetch } from 'openid-client'
import { failSpan, inSpan } from '../lib/spans.js'

// Every call to the provider goes through this fetch. It settles "is the provider broken?"
// before openid-client parses anything: a redirect, a server error, a success that is not
// JSON, or a body too large to be a token response is the provider's fault (502), so that any
// later parse failure can only come from a malformed token (403). It also bounds how much of a
// hostile response is ever read.

/** Far above any real token, JWKS or discovery document. */
export const MAX_PROVIDER_BODY_BYTES = 1024 * 1024

export class ProviderFaultError extends Error {
  override readonly name = 'ProviderFaultError'
}

async function readLimited(res: Response, limit: number): Promise<string> {
  if (res.body === null) return ''
  const reader = res.body.getReader()
  const chunks: Uint8Array[] = []
  let size = 0
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    size += value.byteLength
    if (size > limit) {
      await reader.cancel()
      throw new ProviderFaultError(`the response is larger than ${limit} bytes`)
    }
    chunks.push(value)
  }
  return Buffer.concat(chunks).toString('utf8')
}

export const providerFetch: CustomFetch = async (url, options) => {
  const res = await fetch(url, options as RequestInit)
  const where = new URL(url).pathname
  if ((res.status >= 300 && res.status < 400) || res.status >= 500) {
    await res.body?.cancel()
    throw new ProviderFaultError(`${where} answered HTTP ${res.status}`)
  }
  const body = await readLimited(res, MAX_PROVIDER_BODY_BYTES)
  if (res.status < 300 && body !== '') {
    // OAuth 2.0 (RFC 6749 5.1) and discovery answer application/json; anything else is not an
    // answer we can trust, even if it happens to parse.
    if (!/^application\/([a-z0-9.+-]+\+)?json\s*(;|$)/i.test(res.headers.get('content-type') ?? '')) {
      throw new ProviderFaultError(`${where} answered ${res.headers.get('content-type') ?? 'no content type'}, not JSON`)
    }
    try {
      JSON.parse(body)
    } catch {
      throw new ProviderFaultError(`${where} answered malformed JSON`)
    }
  }
  return new Response(body === '' ? null : body, { status: res.status, statusText: res.statusText, headers: res.headers })
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
    return inSpan(tracing.tracer, `${method} ${target.pathname}`, { kind: SpanKind.CLIENT, attributes }, async (span) => {
      const res = await measured(url, options)
      span.setAttribute('http.response.status_code', res.status)
      if (res.status >= 400) failSpan(span, String(res.status))
      return res
    })
  }
}
