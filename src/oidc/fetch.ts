import type { CustomFetch } from 'openid-client'

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

/** providerFetch, measured by `observe` (a thrown error or a 5xx is a failure). */
export function observedFetch(observe: ProviderCallObserver | undefined): CustomFetch {
  if (observe === undefined) return providerFetch
  return async (url, options) => {
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
}
