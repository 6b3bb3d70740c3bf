import type { CookieSerializeOptions } from '@fastify/cookie'
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { CookiesConfig } from '../config/types.js'
import { GatewayError } from '../errors.js'
import { CALLBACK_PATH } from '../paths.js'
import type { CookieCipher } from './cipher.js'

// Naming, attributes, sealing and chunking of every cookie the gateway sets. One place decides
// them so that setting, reading, clearing and stripping (before proxying) always agree.


/** Browsers drop cookies over 4096 bytes (name + value + attributes); stay well under. */
export const CHUNK_CHARS = 3800
/** Cap per cookie role, so the request header stays under the server's 32 KiB header limit. */
export const MAX_CHUNKS = 3
/** Marks the first cookie of a chunked value: `<count>~<part>`. `~` never occurs in sealed values. */
const CHUNK_MARK = '~'

export type CookieRole = 'session' | 'credentials'

interface RoleSpec {
  name: string
  path: string
}

export class GatewayCookies {
  readonly #cipher: CookieCipher
  readonly #base: CookieSerializeOptions
  readonly #roles: Record<CookieRole, RoleSpec>
  readonly #txPrefix: string
  readonly #names: Set<string>

  constructor(config: CookiesConfig, cipher: CookieCipher) {
    this.#cipher = cipher
    // __Host- binds a cookie to this exact origin (RFC 6265bis 4.1.3.2); it requires Secure,
    // Path=/ and no Domain. Cookies on a narrower path can only carry __Secure-.
    const host = config.secure && config.domain === undefined ? '__Host-' : config.secure ? '__Secure-' : ''
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
    // Both credentials names are stripped before proxying: after a switch of cookies.credentialsPath
    // browsers still hold the other one until the session ends.
    const names = [this.#roles.session.name, `${host}${config.name}_cred`, `${secure}${config.name}_cred`]
    this.#names = new Set()
    for (const name of names) {
      this.#names.add(name)
      for (let i = 1; i < MAX_CHUNKS; i++) this.#names.add(`${name}_${i}`)
    }
  }

  /** True for every cookie name the gateway owns, so the proxy can strip them from upstream requests. */
  isGatewayCookie = (name: string): boolean => this.#names.has(name) || name.startsWith(this.#txPrefix)

  /**
   * Whether a browser sends this role's cookie with `req` (RFC 6265 5.1.4 path-match). The
   * credentials are used only where their cookie is meant to travel, whatever a browser holds.
   */
  reaches(req: FastifyRequest, role: CookieRole): boolean {
    const { path } = this.#roles[role]
    if (path === '/') return true
    const q = req.url.indexOf('?')
    const requestPath = q === -1 ? req.url : req.url.slice(0, q)
    return requestPath === path || requestPath.startsWith(`${path}/`)
  }

  /** Opens the value of a role's cookie (joining its chunks), or `undefined` when absent or invalid. */
  read(req: FastifyRequest, role: CookieRole): unknown {
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
    return this.#cipher.open(role, sealed)
  }

  /**
   * Seals and sets a role's cookie, splitting it when it is too large for one cookie. A value
   * that would need more than MAX_CHUNKS cookies is refused rather than set broken.
   */
  write(req: FastifyRequest, reply: FastifyReply, role: CookieRole, data: unknown, expiresAt: number): void {
    const { name, path } = this.#roles[role]
    const sealed = this.#cipher.seal(role, data, expiresAt)
    const count = Math.ceil(sealed.length / CHUNK_CHARS)
    if (count > MAX_CHUNKS) {
      throw new GatewayError(
        'session_too_large',
        'the provider issued tokens too large for cookie sessions; configure session.store: memory or redis',
      )
    }
    const maxAge = Math.max(0, Math.floor(expiresAt - Date.now() / 1000))
    const options = { ...this.#base, path, maxAge }
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

  /** Expires a role's cookie and all its chunks (Max-Age=0 on the same name, path and domain). */
  clear(reply: FastifyReply, role: CookieRole): void {
    const { name, path } = this.#roles[role]
    this.#expire(reply, name, path)
    for (let i = 1; i < MAX_CHUNKS; i++) this.#expire(reply, `${name}_${i}`, path)
  }

  /** Transaction cookies: one per sign-in in progress, so parallel sign-ins (two tabs) each complete. */
  writeTransaction(reply: FastifyReply, state: string, data: unknown, ttlSeconds: number): void {
    const sealed = this.#cipher.seal(`tx:${state}`, data, Date.now() / 1000 + ttlSeconds)
    reply.setCookie(this.#txName(state), sealed, { ...this.#base, path: CALLBACK_PATH, maxAge: ttlSeconds })
  }

  /**
   * The transaction started by this browser for `state`, or `undefined`. The state is the
   * authenticated data of the seal, so a cookie only opens for the exact state it was made for.
   */
  readTransaction(req: FastifyRequest, state: string): unknown {
    const sealed = req.cookies[this.#txName(state)]
    return sealed === undefined ? undefined : this.#cipher.open(`tx:${state}`, sealed)
  }

  clearTransaction(reply: FastifyReply, state: string): void {
    this.#expire(reply, this.#txName(state), CALLBACK_PATH)
  }

  #txName(state: string): string {
    // A prefix of the state is enough to tell parallel transactions apart; the full state is
    // checked by the seal. Only cookie-name-safe characters of the state are used.
    return this.#txPrefix + state.slice(0, 16).replace(/[^A-Za-z0-9_-]/g, '')
  }

  #expire(reply: FastifyReply, name: string, path: string): void {
    reply.setCookie(name, '', { ...this.#base, path, maxAge: 0, expires: new Date(0) })
  }
}
