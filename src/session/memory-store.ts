import type { FastifyReply, FastifyRequest } from 'fastify'
import type { GatewayCookies } from './cookies.js'
import type { Session, SessionStore } from './types.js'

// Sessions in this process's memory; the browser holds only a sealed reference. For a single
// replica that wants transparent refresh on proxied paths or tokens too large for cookies.
// Sessions are lost on restart; use the redis store for several replicas.

interface Reference {
  i: string
}

const SWEEP_INTERVAL_MS = 60_000

export class MemorySessionStore implements SessionStore {
  readonly #cookies: GatewayCookies
  readonly #maxAgeSeconds: number
  readonly #sessions = new Map<string, Session>()
  readonly #sweeper: NodeJS.Timeout

  constructor(cookies: GatewayCookies, maxAgeSeconds: number) {
    this.#cookies = cookies
    this.#maxAgeSeconds = maxAgeSeconds
    this.#sweeper = setInterval(() => this.#sweep(), SWEEP_INTERVAL_MS).unref()
  }

  async load(req: FastifyRequest): Promise<Session | undefined> {
    const ref = this.#cookies.read(req, 'session')
    if (typeof ref !== 'object' || ref === null || typeof (ref as Reference).i !== 'string') return undefined
    const session = this.#sessions.get((ref as Reference).i)
    if (session === undefined || this.#ended(session)) return undefined
    return session
  }

  async save(req: FastifyRequest, reply: FastifyReply, session: Session): Promise<void> {
    const known = this.#sessions.has(session.id)
    this.#sessions.set(session.id, session)
    if (!known) {
      const ref: Reference = { i: session.id }
      this.#cookies.write(req, reply, 'session', ref, session.createdAt + this.#maxAgeSeconds)
    }
  }

  async destroy(req: FastifyRequest, reply: FastifyReply): Promise<void> {
    const ref = this.#cookies.read(req, 'session')
    if (typeof ref === 'object' && ref !== null && typeof (ref as Reference).i === 'string') {
      this.#sessions.delete((ref as Reference).i)
    }
    this.#cookies.clear(reply, 'session')
    this.#cookies.clear(reply, 'credentials')
  }

  async close(): Promise<void> {
    clearInterval(this.#sweeper)
    this.#sessions.clear()
  }

  #ended(session: Session): boolean {
    return session.createdAt + this.#maxAgeSeconds <= Date.now() / 1000
  }

  #sweep(): void {
    for (const [id, session] of this.#sessions) if (this.#ended(session)) this.#sessions.delete(id)
  }
}
