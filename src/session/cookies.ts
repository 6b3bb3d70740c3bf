import { createHash, randomBytes, timingSafeEqual } from 'node:crypto'
import type { CookieSerializeOptions } from '@fastify/cookie'
import type { CookiesConfig } from '../options/types.js'
import { GatewayError } from '../contract/errors.js'
import { CALLBACK_PATH, isAtOrBelow } from '../contract/endpoints.js'
import type { CookieCipher } from './cipher.js'
import { SEALED_TRANSACTION, type SignInTransaction } from './sealed.js'
import type { SessionReply, SessionRequest } from './types.js'

/** A request as the cookie hook reads it: its Cookie header in, its jar of the gateway's cookies out. */
interface CookieReadingRequest {
  readonly url: string
  readonly headers: { readonly cookie?: string | undefined }
  cookies: { [name: string]: string | undefined }
}

// Naming, attributes, sealing and chunking of every cookie the gateway sets. One place decides
// them so that setting, reading, clearing and stripping (before proxying) always agree.
//
// Browsers keep sending the cookies of an earlier configuration (another cookies.name, secure
// on or off: the __Host-/__Secure- prefix, credentialsPath) until they expire. Upstreams must
// see none of them: a sealed session in an upstream's logs is a session anyone can replay. So:
// - every name the gateway could have used is stripped: each prefix, role and chunk variant of
//   the current base name and of every base name this process ran with (reloads);
// - a value that is a gateway seal (it starts with the key id of a configured secret) is
//   stripped whatever its name (a rename by restart), and so are its chunks;
// - each seal is bound to its role and cookie name (the authenticated data), so a seal copied
//   under another name, or into another role, does not open;
// - cookies of the gateway's that the current configuration does not use are expired in the
//   browser the first time a request brings them (expireFormer).
//
// Sign-in transactions (login CSRF, RFC 9700 4.7.1; RFC 6265bis 8.6 on cookie tossing): the
// transaction cookie travels only to the callback (it is large) and, with cookies.domain, to every
// host of that domain, so a sibling host could plant one of its own there (its own sign-in's, as
// the attacker), and the callback would sign the victim in as the attacker. Every transaction is
// therefore sealed to this browser's binding: a random value in a `__Host-` cookie (Secure,
// Path=/, no Domain: RFC 6265bis 4.1.3.2), which only the gateway's own host can set and no
// sibling can set, overwrite or shadow. The callback opens a transaction only when the browser's
// binding is the one sealed in it. Plain http (cookies.secure: false) has no prefixes: there the
// binding is an ordinary cookie, which a sibling host can toss too.
//
// Several domains (cookies.domains, docs/features/several-domains.md): each cookie is set with the
// longest configured domain the request's host is in, on a dot boundary (RFC 6265 5.1.3
// domain-match; oauth2-proxy's --cookie-domain also takes the longest, but matches a bare suffix
// and falls back to its shortest domain, a Domain the browser then ignores, RFC 6265 5.3 step 6).
// A host in none gets a host-only cookie: the only one a browser keeps there. The session cookie
// keeps one name on every domain (`__Secure-` when secure: RFC 6265bis 4.1.3.2 forbids a Domain on
// `__Host-` cookies), so a seal bound to its name opens on every domain. Clearing expires every
// variant (host-only and each domain): a browser drops the lines whose Domain does not cover the
// host. The single `cookies.domain` keeps its meaning: that Domain on every cookie, whatever the
// host (a forward-auth check's host is the ingress's call, not the page's).
//
// Transactions are bounded (MAX_TRANSACTIONS per browser): each one sets a cookie of up to about
// 3 KB for 10 minutes, and unbounded they would push the callback's request past the server's
// header limit (431) until they expire. They travel only to the callback, so the binding (which
// travels everywhere, about 100 bytes) lists them, oldest first (their names carry their start),
// and the redirect endpoint expires the oldest beyond the bound.

/** Browsers drop cookies over 4096 bytes (name + value + attributes); stay well under. */
export const CHUNK_CHARS = 3800
/** Cap per cookie role, so the request header stays under the server's 32 KiB header limit. */
export const MAX_CHUNKS = 3
/** Marks the first cookie of a chunked value: `<count>~<part>`. `~` never occurs in sealed values. */
const CHUNK_MARK = '~'
/** The prefixes a cookie name can carry (RFC 6265bis 4.1.3): cookies.secure and cookies.domain choose. */
const NAME_PREFIXES = ['', '__Host-', '__Secure-'] as const
const ROLE_SUFFIXES = ['', '_cred'] as const
/**
 * Sign-ins a browser may have in progress at once (tabs); starting one more drops the oldest. With
 * the largest transaction (a 2048-character redirectAfter, a DPoP key) the callback then carries
 * at most about 10 KB of them.
 */
export const MAX_TRANSACTIONS = 3
/** The base-36 epoch second a transaction cookie's name carries after the prefix: its start. */
const TX_TIME_CHARS = 7
/** Characters of the state in a transaction cookie's name, after its start. */
const TX_STATE_CHARS = 16
const BINDING_SUFFIX = '_txb'
/** The binding: 128 random bits, base64url. */
const BINDING_BYTES = 16
const BINDING = /^[A-Za-z0-9_-]{22}$/
/** A transaction cookie's name after the prefix: its start, then its state's tag. */
const TX_SUFFIX = /^[0-9a-z]{7}[A-Za-z0-9_-]{0,16}$/

/**
 * The prefix of the cookies on Path=/ (the session's): __Host- binds a cookie to this exact origin
 * (RFC 6265bis 4.1.3.2) and requires Secure, Path=/ and no Domain; with a Domain only __Secure-
 * remains. Cookies on a narrower path can only carry __Secure-.
 */
function sessionCookiePrefix(config: Pick<CookiesConfig, 'secure' | 'domain' | 'domains'>): string {
  return config.secure && config.domain === undefined && config.domains === undefined ? '__Host-' : config.secure ? '__Secure-' : ''
}

/** The session cookie's name as browsers see it (before chunking): what an operator looks for in a browser. */
export function sessionCookieName(config: Pick<CookiesConfig, 'name' | 'secure' | 'domain' | 'domains'>): string {
  return `${sessionCookiePrefix(config)}${config.name}`
}

/** The hostname of a `host[:port]` (an IPv6 literal keeps its brackets), lowercased. */
function hostnameOf(host: string): string {
  const end = host.startsWith('[') ? host.indexOf(']') + 1 : host.lastIndexOf(':')
  return (end > 0 ? host.slice(0, end) : host).toLowerCase()
}

/** RFC 6265 5.1.3: `hostname` is `domain` or a name under it (on a dot boundary); never an IP literal. */
export function domainMatches(hostname: string, domain: string): boolean {
  return hostname === domain || (hostname.endsWith(domain) && hostname.charCodeAt(hostname.length - domain.length - 1) === 0x2e)
}

/** The session's cookies as a browser holds them, to be set again on another domain (routes/handoff.ts). */
export interface HandedCookies {
  /** Each cookie of the session and credentials roles, chunks included: name and sealed value. */
  readonly cookies: ReadonlyArray<readonly [name: string, value: string]>
}

/** How long the binding is kept once a callback has taken its transaction off it: the contract's 10 minutes. */
const TRANSACTION_BINDING_SECONDS = 600

export type CookieRole = 'session' | 'credentials'

interface RoleSpec {
  name: string
  path: string
}

/**
 * Set by `jar` on a jar in which it read no former cookie name (a symbol: no cookie name, never
 * enumerated), so that `expireFormer` need not walk it. A jar built otherwise is walked.
 */
const kNoFormer = Symbol('openid-gateway.noFormerCookies')

export class GatewayCookies {
  readonly #cipher: CookieCipher
  readonly #base: CookieSerializeOptions
  readonly #roles: Record<CookieRole, RoleSpec>
  readonly #txPrefix: string
  /** The browser's binding of its transactions: name and attributes. */
  readonly #binding: { name: string; options: CookieSerializeOptions }
  /** Every name of the current configuration's cookies (chunks included); the transaction prefix aside. */
  readonly #current: Set<string>
  /** Every name the gateway could have set, with any prefix, for the current and former base names. */
  readonly #names: Set<string>
  readonly #txPrefixes: string[]
  /** cookies.domains, longest first; undefined with the single `domain` or none. */
  readonly #domains: readonly string[] | undefined
  /** Every Domain a cookie may have been set with: undefined (host-only) and each configured one. */
  readonly #variants: ReadonlyArray<string | undefined>

  /**
   * `formerNames`: the cookies.name values this process ran with before (a reload), whose cookies
   * browsers may still send.
   */
  constructor(config: CookiesConfig, cipher: CookieCipher, formerNames: Iterable<string> = []) {
    this.#cipher = cipher
    const host = sessionCookiePrefix(config)
    const secure = config.secure ? '__Secure-' : ''
    const credentials = { path: config.credentialsPath, name: `${config.credentialsPath === '/' ? host : secure}${config.name}_cred` }
    this.#roles = {
      session: { name: `${host}${config.name}`, path: '/' },
      credentials,
    }
    this.#txPrefix = `${secure}${config.name}_tx_`
    this.#base = {
      httpOnly: true,
      secure: config.secure,
      sameSite: config.sameSite,
      ...(config.domain === undefined ? {} : { domain: config.domain }),
    }
    this.#domains = config.domains === undefined ? undefined : [...config.domains].sort((a, b) => b.length - a.length)
    this.#variants = this.#domains === undefined ? [config.domain] : [undefined, ...this.#domains]
    // Never with the domain: the binding is what a sibling host cannot set. SameSite=None with
    // Secure, so that it comes back with a form_post callback (a cross-site POST) too: it
    // authorizes nothing alone, it only tells this browser's transactions from planted ones.
    this.#binding = {
      name: `${config.secure ? '__Host-' : ''}${config.name}${BINDING_SUFFIX}`,
      options: { httpOnly: true, secure: config.secure, path: '/', sameSite: config.secure ? 'none' : config.sameSite },
    }
    this.#current = new Set([...withChunks([this.#roles.session.name, credentials.name]), this.#binding.name])
    const bases = new Set([config.name, ...formerNames])
    this.#names = new Set()
    this.#txPrefixes = []
    for (const base of bases) {
      for (const prefix of NAME_PREFIXES) {
        for (const name of withChunks(ROLE_SUFFIXES.map((role) => `${prefix}${base}${role}`))) this.#names.add(name)
        this.#names.add(`${prefix}${base}${BINDING_SUFFIX}`)
        this.#txPrefixes.push(`${prefix}${base}_tx_`)
      }
    }
  }

  /**
   * The gateway's cookies in a Cookie header, by name: a request's `cookies`. Only the names the
   * gateway could have set are read (a browser sends the application's cookies too, often most of
   * the header), as the `cookie` parser behind @fastify/cookie reads them: pairs split at `;`,
   * names and values trimmed of SP/HTAB, pairs without `=` skipped, the first occurrence of a name
   * kept, values percent-decoded when they can be.
   */
  jar(header: string | undefined): Record<string, string | undefined> {
    // No prototype: a name like `__proto__` is a name like any other.
    const jar: Record<string, string | undefined> = Object.create(null) as Record<string, string | undefined>
    let former = false
    if (header !== undefined) {
      const len = header.length
      let start = 0
      while (start < len) {
        let end = header.indexOf(';', start)
        if (end === -1) end = len
        const eq = header.indexOf('=', start)
        if (eq !== -1 && eq < end) {
          const name = trimOws(header, start, eq)
          if (jar[name] === undefined && this.isGatewayCookieName(name)) {
            jar[name] = decodeCookieValue(trimOws(header, eq + 1, end))
            if (!former && this.#isFormer(name)) former = true
          }
        }
        start = end + 1
      }
    }
    if (!former) (jar as { [kNoFormer]?: true })[kNoFormer] = true
    return jar
  }

  /**
   * The `onRequest` hook that gives every request its `cookies`, after the target is read
   * (proxy/before-routing.ts) and before the router: only the gateway's are read (`jar`, not every
   * cookie of the header as @fastify/cookie's parsing hook would; that plugin stays for setting
   * cookies), and those of names the gateway had before a rename are expired (`expireFormer`). It
   * takes a callback: an async hook costs a promise and a microtask per request for work that
   * never waits.
   */
  readRequestCookies = (req: CookieReadingRequest, reply: SessionReply, done: () => void): void => {
    req.cookies = this.jar(req.headers.cookie)
    this.expireFormer(req, reply)
    done()
  }

  /**
   * The Domain of the cookies set for a request to `host`: the single `cookies.domain` whatever the
   * host; with `cookies.domains` the longest the host is in, or undefined (host-only) when it is in none.
   */
  domainFor(host: string | undefined): string | undefined {
    if (this.#domains === undefined) return this.#base.domain
    if (host === undefined) return undefined
    const hostname = hostnameOf(host)
    return this.#domains.find((domain) => domainMatches(hostname, domain))
  }

  /** With cookies.domains: the configured domain `host` is in (the longest), else undefined; never with the single `domain`. */
  configuredDomainOf(host: string): string | undefined {
    return this.#domains === undefined ? undefined : this.domainFor(host)
  }

  /** The attributes of a cookie set for `req`: the base ones with the Domain its host chooses. */
  #attributesFor(req: Pick<SessionRequest, 'host'>): CookieSerializeOptions {
    const { domain: _domain, ...base } = this.#base
    const domain = this.domainFor(req.host)
    return domain === undefined ? base : { ...base, domain }
  }

  /** Sets an expired `name` on every Domain it may have been set with. */
  #expireEverywhere(reply: SessionReply, name: string, options: CookieSerializeOptions): void {
    const { domain: _domain, ...rest } = options
    for (const domain of this.#variants) reply.setCookie(name, '', { ...rest, ...(domain === undefined ? {} : { domain }), maxAge: 0, expires: new Date(0) })
  }

  /** A name the gateway could have set that the current configuration does not use: expireFormer expires it. */
  #isFormer(name: string): boolean {
    return !this.#current.has(name) && this.#names.has(name)
  }

  /** True for every cookie name the gateway could have set (any configuration), for upstream responses' Set-Cookie. */
  isGatewayCookieName = (name: string): boolean => this.#names.has(name) || this.#txPrefixes.some((prefix) => name.startsWith(prefix))

  /**
   * True for a cookie the proxy strips from upstream requests: a name the gateway could have set,
   * or a value sealed with one of its keys (a chunked one too: `<count>~<seal>`).
   */
  isGatewayCookie = (name: string, value: string): boolean =>
    this.isGatewayCookieName(name) || this.#cipher.isSealed(value.charAt(1) === CHUNK_MARK ? value.slice(2) : value)

  /**
   * Expires, in the browser, the gateway cookies a request brings that the current configuration
   * does not use (a former name, prefix or credentials path), each once per request that brings it.
   * Transaction cookies are left to their own 10-minute expiry.
   */
  expireFormer(req: SessionRequest, reply: SessionReply): void {
    // A jar that read none is not walked again: for-in over a prototype-less object (a dictionary
    // to V8) is slow, and this runs on every request.
    if ((req.cookies as { [kNoFormer]?: true })[kNoFormer] === true) return
    for (const name in req.cookies) {
      if (!this.#isFormer(name)) continue
      // __Host- cookies exist only with Path=/ and no Domain; the others may have had either.
      if (name.startsWith('__Host-')) {
        reply.setCookie(name, '', { httpOnly: true, secure: true, path: '/', maxAge: 0, expires: new Date(0) })
        continue
      }
      const secure = name.startsWith('__Secure-') || this.#base.secure === true
      for (const path of new Set(['/', this.#roles.credentials.path])) this.#expireEverywhere(reply, name, { ...this.#base, secure, path })
    }
  }

  /**
   * Whether a browser sends this role's cookie with `req` (RFC 6265 5.1.4 path-match). The
   * credentials are used only where their cookie is meant to travel, whatever a browser holds.
   */
  reaches(req: SessionRequest, role: CookieRole): boolean {
    const { path } = this.#roles[role]
    if (path === '/') return true
    const q = req.url.indexOf('?')
    const requestPath = q === -1 ? req.url : req.url.slice(0, q)
    return requestPath === path || requestPath.startsWith(`${path}/`)
  }

  /** Opens the value of a role's cookie (joining its chunks), or `undefined` when absent or invalid. */
  read(req: SessionRequest, role: CookieRole): unknown {
    const { name } = this.#roles[role]
    const first = req.cookies[name]
    if (first === undefined) return undefined
    let sealed = first
    if (first.charAt(1) === CHUNK_MARK) {
      const count = Number(first.charAt(0))
      if (!(count >= 2 && count <= MAX_CHUNKS)) return undefined
      sealed = first.slice(2)
      for (let i = 1; i < count; i++) {
        const part = req.cookies[`${name}_${i}`]
        if (part === undefined) return undefined
        sealed += part
      }
    }
    return this.#cipher.open(this.#purpose(role), sealed)
  }

  /** The authenticated data of a role's seal: the role and the cookie's name. */
  #purpose(role: CookieRole): string {
    return `${role}:${this.#roles[role].name}`
  }

  /**
   * Seals and sets a role's cookie, splitting it when it is too large for one cookie. A value
   * that would need more than MAX_CHUNKS cookies is refused rather than set broken.
   */
  write(req: SessionRequest, reply: SessionReply, role: CookieRole, data: unknown, expiresAt: number): void {
    const { name, path } = this.#roles[role]
    const sealed = this.#cipher.seal(this.#purpose(role), data, expiresAt)
    const count = Math.ceil(sealed.length / CHUNK_CHARS)
    if (count > MAX_CHUNKS) {
      throw new GatewayError('session_too_large', 'the provider issued tokens too large for cookie sessions; configure session.store: memory or redis')
    }
    const maxAge = Math.max(0, Math.floor(expiresAt - this.#cipher.clock.now() / 1000))
    const options = { ...this.#attributesFor(req), path, maxAge }
    if (count === 1) {
      reply.setCookie(name, sealed, options)
    } else {
      for (let i = 0; i < count; i++) {
        const part = sealed.slice(i * CHUNK_CHARS, (i + 1) * CHUNK_CHARS)
        reply.setCookie(i === 0 ? name : `${name}_${i}`, i === 0 ? `${count}${CHUNK_MARK}${part}` : part, options)
      }
    }
    // Chunks of an earlier, larger value would otherwise linger beside the new one.
    for (let i = Math.max(count, 1); i < MAX_CHUNKS; i++) {
      if (req.cookies[`${name}_${i}`] !== undefined) this.#expire(reply, `${name}_${i}`, path)
    }
  }

  /**
   * The session's cookies as this request brings them (the session role's and, when it reaches
   * this path, the credentials'), chunks included, for a hand-off to another domain; undefined
   * without a session cookie. The caller has checked that they open.
   */
  handOver(req: SessionRequest): HandedCookies | undefined {
    const cookies: Array<readonly [string, string]> = []
    for (const role of ['session', 'credentials'] as const) {
      const { name } = this.#roles[role]
      const first = req.cookies[name]
      if (first === undefined) {
        if (role === 'session') return undefined
        continue
      }
      const count = first.charAt(1) === CHUNK_MARK ? Number(first.charAt(0)) : 1
      for (let i = 0; i < count; i++) {
        const chunk = i === 0 ? name : `${name}_${i}`
        const value = req.cookies[chunk]
        if (value === undefined) return undefined
        cookies.push([chunk, value])
      }
    }
    return { cookies }
  }

  /**
   * Sets handed-over cookies (handOver) for this request's host, until `expiresAt` (epoch seconds):
   * only names of the session and credentials roles, each on its role's path.
   */
  receive(req: SessionRequest, reply: SessionReply, handed: HandedCookies, expiresAt: number): void {
    const maxAge = Math.max(0, Math.floor(expiresAt - this.#cipher.clock.now() / 1000))
    const attributes = this.#attributesFor(req)
    const handedNames = new Set(handed.cookies.map(([name]) => name))
    for (const role of ['session', 'credentials'] as const) {
      const { path } = this.#roles[role]
      for (const name of withChunks([this.#roles[role].name])) {
        const value = handed.cookies.find(([handedName]) => handedName === name)?.[1]
        if (value !== undefined) reply.setCookie(name, value, { ...attributes, path, maxAge })
        // Chunks of an earlier, larger session here would otherwise be joined to this one's.
        else if (req.cookies[name] !== undefined && handedNames.size > 0) this.#expire(reply, name, path)
      }
    }
  }

  /**
   * The hand-off's binding on this host (routes/handoff.ts): the digest of the browser's binding
   * nonce, the binding set first when the browser has none. The same host-only cookie as a
   * transaction's: what another host, an attacker's browser or a link cannot give a browser.
   */
  bindHandoff(req: SessionRequest, reply: SessionReply, ttlSeconds: number): string {
    const held = this.#heldBinding(req)
    const nonce = held?.nonce ?? randomBytes(BINDING_BYTES).toString('base64url')
    this.#setBinding(reply, nonce, held?.live ?? [], ttlSeconds, false)
    return bindingDigest(nonce)
  }

  /**
   * Seals a hand-off step's value for `host` (routes/handoff.ts) with the cookie secrets; the step
   * and host are its authenticated purpose, apart from every cookie's (`session:`, `tx:`...).
   */
  sealHandoff(step: 'request' | 'token', host: string, data: unknown, expiresAt: number): string {
    return this.#cipher.seal(`handoff-${step}:${host}`, data, expiresAt)
  }

  /** Opens what sealHandoff sealed for this step and host; undefined when tampered, expired, or for another. */
  openHandoff(step: 'request' | 'token', host: string, sealed: string): unknown {
    return this.#cipher.open(`handoff-${step}:${host}`, sealed)
  }

  /** Whether this browser holds the binding a hand-off was bound to (bindHandoff's digest). */
  handoffBound(req: SessionRequest, digest: string): boolean {
    return boundToBrowser(digest, this.#heldBinding(req)?.nonce)
  }

  /** Expires a role's cookie and all its chunks (Max-Age=0 on the same name, path and domain). */
  clear(reply: SessionReply, role: CookieRole): void {
    const { name, path } = this.#roles[role]
    this.#expire(reply, name, path)
    for (let i = 1; i < MAX_CHUNKS; i++) this.#expire(reply, `${name}_${i}`, path)
  }

  /**
   * Transaction cookies: one per sign-in in progress, so parallel sign-ins (two tabs) each complete,
   * at most MAX_TRANSACTIONS (the oldest of the browser's are expired), each sealed to the
   * browser's binding (set here when the browser has none).
   * `crossSite`: the sign-in returns by a form POST from the provider's site (response_mode
   * form_post), which a browser sends this cookie with only when it is SameSite=None, and
   * SameSite=None only counts with Secure (RFC 6265bis 4.1.2.7; browsers keep Secure cookies of
   * https and loopback origins, config/cross-key-rules.ts refuses the rest). Only this cookie gets it:
   * it opens for its own state only and is cleared by the callback.
   */
  writeTransaction(
    req: SessionRequest,
    reply: SessionReply,
    state: string,
    transaction: SignInTransaction,
    ttlSeconds: number,
    crossSite = false,
    callbackPath: string = CALLBACK_PATH,
  ): void {
    const held = this.#heldBinding(req)
    const nonce = held?.nonce ?? randomBytes(BINDING_BYTES).toString('base64url')
    const now = this.#cipher.clock.now() / 1000
    const sealed = this.#cipher.seal(`tx:${state}`, SEALED_TRANSACTION.encode({ ...transaction, binding: bindingDigest(nonce) }), now + ttlSeconds)
    // The transaction cookies travel only to the callback, so the binding lists them: the newest
    // MAX_TRANSACTIONS - 1 stay, the others are expired by name.
    const live = [...(held?.live ?? [])].sort().reverse()
    // An old one may have been set for another provider's callback path: expired on this one's too.
    const paths = new Set([CALLBACK_PATH, txPath(callbackPath)])
    for (const suffix of live.slice(MAX_TRANSACTIONS - 1))
      for (const path of paths) reply.setCookie(this.#txPrefix + suffix, '', { ...this.#txAttributes(req, false), path, maxAge: 0, expires: new Date(0) })
    const suffix = Math.floor(now).toString(36).padStart(TX_TIME_CHARS, '0') + stateTag(state)
    // Set again with every sign-in: it lives as long as the browser's latest transaction.
    this.#setBinding(reply, nonce, [...live.slice(0, MAX_TRANSACTIONS - 1), suffix], ttlSeconds, crossSite)
    reply.setCookie(this.#txPrefix + suffix, sealed, { ...this.#txAttributes(req, crossSite, callbackPath), maxAge: ttlSeconds })
  }

  /**
   * The transaction started by this browser for `state`, or `undefined`. The state is the
   * authenticated data of the seal, so a cookie only opens for the exact state it was made for;
   * and only with the binding it was sealed to (a transaction planted by a sibling host is
   * another browser's).
   */
  readTransaction(req: SessionRequest, state: string): SignInTransaction | undefined {
    const name = this.#transactionName(req, state)
    const sealed = name === undefined ? undefined : req.cookies[name]
    if (sealed === undefined) return undefined
    const opened = SEALED_TRANSACTION.decode(this.#cipher.open(`tx:${state}`, sealed))
    if (opened === undefined || !boundToBrowser(opened.binding, this.#heldBinding(req)?.nonce)) return undefined
    const { binding: _binding, ...transaction } = opened
    return transaction
  }

  /** Expires a transaction cookie, with the attributes it was set with (`crossSite` as for writeTransaction), and takes it off the binding's list. */
  clearTransaction(req: SessionRequest, reply: SessionReply, state: string, crossSite = false, callbackPath: string = CALLBACK_PATH): void {
    const name = this.#transactionName(req, state)
    if (name === undefined) return
    reply.setCookie(name, '', { ...this.#txAttributes(req, crossSite, callbackPath), maxAge: 0, expires: new Date(0) })
    const held = this.#heldBinding(req)
    const suffix = name.slice(this.#txPrefix.length)
    if (held?.live.includes(suffix) !== true) return
    const live = held.live.filter((s) => s !== suffix)
    // The last one done: the binding goes too (no cookie of a sign-in outlives it).
    if (live.length === 0) this.clearBinding(reply, crossSite)
    else this.#setBinding(reply, held.nonce, live, TRANSACTION_BINDING_SECONDS, crossSite)
  }

  /** Expires the binding (a logout: every gateway cookie goes; sign-ins in progress in other tabs start again). */
  clearBinding(reply: SessionReply, crossSite = false): void {
    reply.setCookie(this.#binding.name, '', { ...this.#bindingAttributes(crossSite), maxAge: 0, expires: new Date(0) })
  }

  /** The binding's attributes: SameSite=None; Secure for a form_post sign-in, as its transaction's (plain http configurations too). */
  #bindingAttributes(crossSite: boolean): CookieSerializeOptions {
    return crossSite ? { ...this.#binding.options, sameSite: 'none', secure: true } : this.#binding.options
  }

  /** The browser's binding: its secret, and the name suffixes of its transactions (oldest first); undefined when absent or malformed. */
  #heldBinding(req: SessionRequest): { nonce: string; live: string[] } | undefined {
    const value = req.cookies[this.#binding.name]
    if (value === undefined) return undefined
    const [nonce, ...live] = value.split('.')
    if (nonce === undefined || !BINDING.test(nonce) || live.length > MAX_TRANSACTIONS || !live.every((s) => TX_SUFFIX.test(s))) return undefined
    return { nonce, live }
  }

  #setBinding(reply: SessionReply, nonce: string, live: readonly string[], ttlSeconds: number, crossSite: boolean): void {
    reply.setCookie(this.#binding.name, [nonce, ...live].join('.'), { ...this.#bindingAttributes(crossSite), maxAge: ttlSeconds })
  }

  /** `callbackPath`: the provider's (contract/endpoints.ts callbackPath); the cookie travels to it only. */
  #txAttributes(req: SessionRequest, crossSite: boolean, callbackPath: string = CALLBACK_PATH): CookieSerializeOptions {
    const base = this.#attributesFor(req)
    const path = txPath(callbackPath)
    return crossSite ? { ...base, path, sameSite: 'none', secure: true } : { ...base, path }
  }

  /** The names of the browser's transaction cookies (the current configuration's). */
  #transactionNames(req: SessionRequest): string[] {
    return Object.keys(req.cookies).filter((name) => name.startsWith(this.#txPrefix))
  }

  /** The cookie of the transaction for `state`: a prefix of the state tells parallel ones apart; the seal checks it whole. */
  #transactionName(req: SessionRequest, state: string): string | undefined {
    const tag = stateTag(state)
    return this.#transactionNames(req).find((name) => name.length === this.#txPrefix.length + TX_TIME_CHARS + tag.length && name.endsWith(tag))
  }

  #expire(reply: SessionReply, name: string, path: string): void {
    this.#expireEverywhere(reply, name, { ...this.#base, path })
  }
}

/**
 * The Path of a transaction cookie for a provider's callback: CALLBACK_PATH for the contract's
 * callbacks (each provider's own is below it), the provider's redirectPath otherwise.
 */
function txPath(callbackPath: string): string {
  return isAtOrBelow(callbackPath, CALLBACK_PATH) ? CALLBACK_PATH : callbackPath
}

/** Only cookie-name-safe characters of the state, TX_STATE_CHARS of them at most. */
function stateTag(state: string): string {
  return state.slice(0, TX_STATE_CHARS).replace(/[^A-Za-z0-9_-]/g, '')
}

/** What a transaction keeps of the binding: its digest, so the seal never holds the secret itself. */
function bindingDigest(binding: string): string {
  return createHash('sha256').update(binding).digest('base64url')
}

/** Whether the browser's binding cookie is the one a transaction was sealed to (a transaction without one was not). */
function boundToBrowser(sealedDigest: string | undefined, held: string | undefined): boolean {
  if (sealedDigest === undefined || held === undefined) return false
  const expected = Buffer.from(sealedDigest)
  const actual = Buffer.from(bindingDigest(held))
  return expected.length === actual.length && timingSafeEqual(expected, actual)
}

function trimOws(text: string, from: number, to: number): string {
  while (from < to && (text.charCodeAt(from) === 0x20 || text.charCodeAt(from) === 0x09)) from++
  while (to > from && (text.charCodeAt(to - 1) === 0x20 || text.charCodeAt(to - 1) === 0x09)) to--
  return text.slice(from, to)
}

/** A cookie value percent-decoded, or as sent when it does not decode (the `cookie` parser's rule). */
function decodeCookieValue(value: string): string {
  if (!value.includes('%')) return value
  try {
    return decodeURIComponent(value)
  } catch {
    return value
  }
}

/** The names and their chunks' names (`<name>_1`…). */
function withChunks(names: readonly string[]): string[] {
  return names.flatMap((name) => [name, ...Array.from({ length: MAX_CHUNKS - 1 }, (_, i) => `${name}_${i + 1}`)])
}

/** @fastify/cookie's serializer (app.serializeCookie). */
export type CookieSerializer = (name: string, value: string, options: Omit<CookieSerializeOptions, 'secure'> & { secure?: boolean }) => string

/**
 * The Set-Cookie lines of an answer that is not a Fastify reply (the gRPC ext_authz check), set as
 * @fastify/cookie's reply.setCookie sets them: SameSite=Lax unless the options say otherwise, and
 * one line per name, domain and path (the last one set wins).
 */
export class SetCookieLines implements SessionReply {
  readonly #serialize: CookieSerializer
  readonly #lines = new Map<string, string>()

  constructor(serialize: CookieSerializer) {
    this.#serialize = serialize
  }

  setCookie(name: string, value: string, options: CookieSerializeOptions): void {
    // `secure: 'auto'` (Secure over https) is never used by the gateway, whose cookies say which;
    // a check cannot tell the scheme, so it would be Secure.
    const secure = options.secure === 'auto' ? true : options.secure
    this.#lines.set(`${name};${options.domain};${options.path ?? '/'}`, this.#serialize(name, value, { sameSite: 'lax', ...options, secure }))
  }

  get lines(): string[] {
    return [...this.#lines.values()]
  }
}
