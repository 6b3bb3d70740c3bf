import { randomBytes } from 'node:crypto'
import { GatewayError } from '../contract/errors.js'
import { HANDOFF_PATH, signInPath } from '../contract/endpoints.js'
import type { JtiReplay } from '../oidc/jti-replay.js'
import { domainMatches, type GatewayCookies, type HandedCookies } from '../session/cookies.js'
import type { IssuerBinding } from '../session/issuer-binding.js'
import type { SessionReply, SessionStore } from '../session/types.js'
import { single } from './params.js'
import type { SignInAnswer, SignInRequest } from './sign-in-flow.js'

// One sign-in for several cookie domains (cookies.domains; docs/features/several-domains.md).
// A browser keeps a cookie only for a domain that covers the host that set it (RFC 6265 5.3 step
// 6), so the callback, on server.publicUrl's host, can set the session for its own domain only.
// A host H of another configured domain gets the same session through GET /api/v1/openid/handoff,
// in three steps (Pomerium's "additional login redirect hosts" chain redirects the same way):
//
// 1. begin, on H (`?redirectAfter=<path>`; where the callback sends a sign-in meant for H): a
//    host-only binding nonce is set on H (the transactions' binding, session/cookies.ts), and the
//    browser goes to the public host with a sealed request naming H, the nonce's digest and the path.
// 2. mint, on the public host (`?request=<sealed>`): the browser's own session there (its cookies,
//    sent with this top-level navigation under SameSite=Lax, RFC 6265bis 5.2.1) is sealed into a
//    hand-off token for H, bound to the nonce's digest, usable once (a random jti), valid
//    TOKEN_SECONDS; no session: the browser signs in first and comes back through step 1.
// 3. complete, on H (`?token=<sealed>`): the token opens only on the host it names, before its
//    expiry, in the browser holding the nonce, once (the jti replay guard, oidc/jti-replay.ts: in
//    Redis when configured, so across replicas); the session's cookies are set for H's domain and
//    the browser goes to the path on H.
//
// What each check stops:
// - The seals are AES-256-GCM with the cookie secrets (session/cipher.ts), their purpose (step and
//   host) authenticated: a tampered token, or one for another host or domain, does not open.
// - Login CSRF / session fixation: an attacker who holds a token for their own session cannot
//   deliver it to a victim (RFC 9700 4.7.1's concern, applied to the hand-off): it opens only with
//   the binding nonce of the browser that began step 1, a host-only cookie no link can give.
// - Open redirect: every location is a configured domain's host (checked at each step: a reload
//   may have dropped it) or the public URL, and the path goes through the redirectAfter rules
//   (redirect-after.ts) as a relative path; nothing else is followed. A host that is in no
//   configured domain, or that the public host's cookie already reaches, gets a 400.
// - Leaks: the token is no session (an encrypted envelope opened once, in a few seconds); every
//   answer is no-store with Referrer-Policy: no-referrer, so the URL is neither kept nor passed on.

/** Step 1 to 2: the browser comes straight back; a slow redirect chain is a failed one. */
const REQUEST_SECONDS = 60
/** Step 2 to 3: "a few seconds", the time of one redirect. */
export const TOKEN_SECONDS = 10
/** How long the binding nonce lives on H: through a sign-in at the provider and back (the transactions' 10 minutes). */
const BINDING_SECONDS = 600
/**
 * The longest token a URL carries: the cookie store's sessions with large tokens would exceed
 * request-line limits (Node's 16 KiB header limit), and the memory and Redis stores' references
 * are small.
 */
const MAX_TOKEN_CHARS = 8000
/** The replay guard's issuer of hand-off jtis (its keys are a digest of issuer and jti). */
const REPLAY_ISSUER = 'urn:openid-gateway:handoff'
const JTI = /^[A-Za-z0-9_-]{22}$/
const DIGEST = /^[A-Za-z0-9_-]{43}$/

/** Step 1's sealed request to the public host. */
interface HandoffRequest {
  /** H's origin as the browser reached it: `scheme://host[:port]`. */
  origin: string
  /** H as `host[:port]`: what the token is bound to. */
  host: string
  path: string
  binding: string
}

/** Step 2's token, opened only on its host. */
interface HandoffToken extends HandedCookies {
  jti: string
  binding: string
  path: string
  /** The session's end, epoch seconds: the cookies' Max-Age on H. */
  until: number
  /** The token's own expiry (the replay guard keeps its jti until then). */
  exp: number
}

export interface HandoffOptions {
  cookies: GatewayCookies
  store: SessionStore
  bindIssuer: IssuerBinding
  replay: JtiReplay
  publicUrl: string
  validateRedirectAfter: (value: string) => string | null
  /** session.maxAgeSeconds: the handed cookies live as long as the session. */
  sessionMaxAgeSeconds: number
  nowSeconds: () => number
}

/** A request of the hand-off: what the flow reads, with the host the browser used. */
export interface HandoffRequestInput extends SignInRequest {
  readonly host: string
}

function refused(message: string): GatewayError {
  return new GatewayError('bad_request', message)
}

function isString(value: unknown): value is string {
  return typeof value === 'string'
}

function asRequest(value: unknown): HandoffRequest | undefined {
  if (typeof value !== 'object' || value === null) return undefined
  const v = value as Record<string, unknown>
  if (!isString(v.origin) || !isString(v.host) || !isString(v.path) || !isString(v.binding) || !DIGEST.test(v.binding)) return undefined
  return { origin: v.origin, host: v.host, path: v.path, binding: v.binding }
}

function asToken(value: unknown): HandoffToken | undefined {
  if (typeof value !== 'object' || value === null) return undefined
  const v = value as Record<string, unknown>
  if (!isString(v.jti) || !JTI.test(v.jti) || !isString(v.binding) || !DIGEST.test(v.binding) || !isString(v.path)) return undefined
  if (typeof v.until !== 'number' || typeof v.exp !== 'number' || !Array.isArray(v.cookies)) return undefined
  const cookies = v.cookies.filter((c): c is [string, string] => Array.isArray(c) && c.length === 2 && isString(c[0]) && isString(c[1]))
  if (cookies.length !== v.cookies.length || cookies.length === 0) return undefined
  return { jti: v.jti, binding: v.binding, path: v.path, until: v.until, exp: v.exp, cookies }
}

export class Handoff {
  readonly #options: HandoffOptions
  readonly #public: URL
  /** The Domain the callback's cookie gets on the public host (undefined: host-only). */
  readonly #publicDomain: string | undefined

  constructor(options: HandoffOptions) {
    this.#options = options
    this.#public = new URL(options.publicUrl)
    this.#publicDomain = options.cookies.domainFor(this.#public.host)
  }

  /**
   * A request's `host[:port]` as a URL of the public URL's scheme writes it (lowercased, without the
   * scheme's default port), so that every step compares and binds the same spelling; undefined
   * for what is no host.
   */
  #canonical(host: string): string | undefined {
    try {
      return new URL(`${this.#public.protocol}//${host}/`).host
    } catch {
      return undefined
    }
  }

  /**
   * Whether the public host's session cookie misses `host` (canonical) while a configured domain
   * covers it: then a sign-in returning there goes through the hand-off.
   */
  #needsHandoff(host: string | undefined): host is string {
    const { cookies } = this.#options
    if (host === undefined || host === this.#public.host || cookies.configuredDomainOf(host) === undefined) return false
    const hostname = new URL(`${this.#public.protocol}//${host}/`).hostname
    return this.#publicDomain === undefined || !domainMatches(hostname, this.#publicDomain)
  }

  /**
   * Where the callback sends a browser whose sign-in returns to `redirectAfter` (validated): step 1
   * on its host when the new cookie does not reach it, else undefined (straight there).
   */
  locationAfterSignIn(redirectAfter: string): string | undefined {
    if (!/^https?:\/\//i.test(redirectAfter)) return undefined
    const target = new URL(redirectAfter)
    if (!this.#needsHandoff(target.host)) return undefined
    return `${target.origin}${HANDOFF_PATH}?redirectAfter=${encodeURIComponent(target.pathname + target.search + target.hash)}`
  }

  /** GET /api/v1/openid/handoff: exactly one of `redirectAfter` (step 1), `request` (step 2), `token` (step 3). */
  async step(req: HandoffRequestInput, reply: SessionReply, query: URLSearchParams): Promise<SignInAnswer> {
    const given = (['redirectAfter', 'request', 'token'] as const).filter((name) => query.has(name))
    if (given.length !== 1) throw refused('the hand-off takes exactly one of redirectAfter, request and token')
    const [name] = given
    const value = single(query, name as string) ?? ''
    if (name === 'redirectAfter') return this.#begin(req, reply, value)
    if (name === 'request') return this.#mint(req, value)
    return this.#complete(req, reply, value)
  }

  /** Step 1, on H. */
  #begin(req: HandoffRequestInput, reply: SessionReply, redirectAfter: string): SignInAnswer {
    const { cookies, validateRedirectAfter, nowSeconds } = this.#options
    const host = this.#canonical(req.host)
    if (!this.#needsHandoff(host)) throw refused('this host is in no configured cookie domain that needs a hand-off')
    const path = redirectAfter.startsWith('/') ? validateRedirectAfter(redirectAfter) : null
    if (path?.startsWith('/') !== true) throw refused('redirectAfter must be a path on this host')
    const binding = cookies.bindHandoff(req, reply, BINDING_SECONDS)
    // The public URL's scheme: the hosts of one gateway are served alike, and a scheme read off the
    // request is the proxy's in front unless server.trustedProxies names it.
    const request: HandoffRequest = { origin: `${this.#public.protocol}//${host}`, host, path, binding }
    const sealed = cookies.sealHandoff('request', this.#public.host, request, nowSeconds() + REQUEST_SECONDS)
    return { redirect: `${this.#options.publicUrl}${HANDOFF_PATH}?request=${sealed}`, status: 302, noStore: true }
  }

  /** Step 2, on the public host. */
  async #mint(req: HandoffRequestInput, sealed: string): Promise<SignInAnswer> {
    const { cookies, store, bindIssuer, validateRedirectAfter, nowSeconds, sessionMaxAgeSeconds } = this.#options
    if (this.#canonical(req.host) !== this.#public.host) throw refused('a hand-off request is answered on the public host only')
    const request = asRequest(cookies.openHandoff('request', this.#public.host, sealed))
    if (request === undefined) throw refused('the hand-off request is invalid or expired')
    if (!this.#needsHandoff(request.host)) throw refused('the hand-off names a host in no configured cookie domain')
    const loaded = await store.load(req)
    const session = loaded === undefined ? undefined : bindIssuer(loaded)
    const handed = session === undefined ? undefined : cookies.handOver(req)
    if (session === undefined || handed === undefined) {
      // Not signed in here (or no longer): sign in, and the callback brings the browser back through step 1.
      const back = validateRedirectAfter(request.origin + request.path)
      if (back === null) throw refused(`redirects.allowedHosts must allow ${request.host} for a sign-in to return there`)
      return { redirect: signInPath(back), status: 302, noStore: true }
    }
    const now = nowSeconds()
    const token: HandoffToken = {
      jti: randomBytes(16).toString('base64url'),
      binding: request.binding,
      path: request.path,
      until: session.createdAt + sessionMaxAgeSeconds,
      exp: now + TOKEN_SECONDS,
      cookies: handed.cookies,
    }
    const value = cookies.sealHandoff('token', request.host, token, token.exp)
    if (value.length > MAX_TOKEN_CHARS)
      throw new GatewayError('session_too_large', 'the session is too large to hand to another domain in a URL; configure session.store: memory or redis')
    req.log.info({ host: request.host }, 'sign-in handed to another cookie domain')
    return { redirect: `${request.origin}${HANDOFF_PATH}?token=${value}`, status: 302, noStore: true }
  }

  /** Step 3, on H. */
  async #complete(req: HandoffRequestInput, reply: SessionReply, sealed: string): Promise<SignInAnswer> {
    const { cookies, replay } = this.#options
    const host = this.#canonical(req.host)
    if (!this.#needsHandoff(host)) throw refused('this host is in no configured cookie domain that needs a hand-off')
    const token = asToken(cookies.openHandoff('token', host, sealed))
    if (token === undefined) throw refused('the hand-off token is invalid, expired, or for another host')
    if (!cookies.handoffBound(req, token.binding)) {
      req.log.warn({ host }, 'hand-off refused: the token was issued to another browser')
      throw refused('the hand-off was started in another browser')
    }
    if (!(await replay.firstUse(REPLAY_ISSUER, token.jti, token.exp))) {
      req.log.warn({ host }, 'hand-off refused: the token was used before')
      throw refused('the hand-off token was used before')
    }
    cookies.receive(req, reply, token, token.until)
    return { redirect: token.path, status: 302, noStore: true }
  }
}
