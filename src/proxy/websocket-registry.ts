import type { Duplex } from 'node:stream'
import { WebSocket } from 'ws'
import type { SocketAccess, SocketGrant } from './websocket-access.js'
import { selects, type SessionSelector } from '../session/types.js'

// Proxied WebSockets, once open, are no longer requests: nothing would look at them again, and a
// socket opened by a user could keep relaying for hours after the user signed out, was logged out
// by the provider, or lost access in a reload. The registry knows each open
// socket with the grant it was opened under, and closes it with 1008 (policy violation,
// RFC 6455 section 7.4.1) when:
// - its session is logged out here (routes/sign-in-flow.ts), or its session or Bearer token is ended by a
//   back-channel logout or a Shared Signals event (this process);
// - its grant no longer holds under the running configuration (a reload, or the sweep that finds
//   sessions, or Bearer tokens on the revocation list, ended by another process or replica);
// - its time is up: websocket.maxLifetimeSeconds, the session's end (session.maxAgeSeconds after
//   sign-in) or its Bearer token's expiry, whichever comes first.

/** RFC 6455 7.4.1: the endpoint received a message that violates its policy; here, access ended. */
export const POLICY_VIOLATION = 1008
/** How often open sockets are checked against their sessions (another process may have ended one). */
export const SWEEP_MS = 10_000
/** setTimeout's longest delay; a later end is checked by the sweep when it comes. */
const MAX_DELAY_MS = 2_147_483_647

/** The configuration serving now's verdict on open sockets: its SocketAccess (a reload hands in the next one's). */
export type SocketVerdict = Pick<SocketAccess, 'holds'>

interface SocketSetter {
  setSocket(this: WebSocket, socket: Duplex, head: Buffer, options: object): void
}

interface Tracked extends SocketGrant {
  ws: WebSocket
  timer: NodeJS.Timeout
}

export class WebSocketRegistry {
  /** Granted upgrades whose WebSocket is not open yet, by their connection. */
  readonly #granted = new WeakMap<Duplex, SocketGrant>()
  readonly #open = new Set<Tracked>()
  #verdict: SocketVerdict | undefined
  #sweep: NodeJS.Timeout | undefined

  /**
   * The WebSocket class of the proxy's server side (ws's WebSocketServer `WebSocket` option):
   * each socket it opens is tracked under the grant its upgrade request was given.
   */
  readonly WebSocket: typeof WebSocket

  constructor() {
    const attach = (socket: Duplex, ws: WebSocket): void => this.#attach(socket, ws)
    class TrackedWebSocket extends WebSocket {}
    // ws's server hands each accepted socket to setSocket (ws 8, lib/websocket-server.js
    // completeUpgrade); @types/ws does not declare it, so it is reached through this type.
    const base = WebSocket.prototype as unknown as SocketSetter
    ;(TrackedWebSocket.prototype as unknown as SocketSetter).setSocket = function (this: WebSocket, socket, head, options) {
      base.setSocket.call(this, socket, head, options)
      attach(socket, this)
    }
    this.WebSocket = TrackedWebSocket
  }

  /** The access decision passed for this upgrade (the proxy's preHandler). */
  grant(grant: SocketGrant): void {
    this.#granted.set(grant.req.raw.socket, grant)
  }

  /** The running configuration's verdict on open sockets (a reload sets the new one). */
  use(verdict: SocketVerdict): void {
    this.#verdict = verdict
  }

  get size(): number {
    return this.#open.size
  }

  /** Closes the sockets of the gateway session `sessionId` (a logout). */
  endSession(sessionId: string): void {
    for (const tracked of this.#open) if (tracked.sessionId === sessionId) close(tracked, 'signed out')
  }

  /**
   * Closes the sockets of the sessions, and of the Bearer tokens, a back-channel logout or a
   * Shared Signals event ends: those that `selector` names and began at or before `at` (epoch
   * seconds; default: whenever they began). One whose beginning is unknown is closed.
   */
  endSelected(selector: SessionSelector, at = Number.POSITIVE_INFINITY): void {
    for (const tracked of this.#open) {
      if (tracked.identity === null || !selects(selector, { claims: tracked.identity.claims, provider: tracked.identity.provider })) continue
      if (tracked.issuedAt === undefined || tracked.issuedAt <= at) close(tracked, 'logged out by the identity provider')
    }
  }

  /** Asks the running configuration about every open socket; closes those it refuses. */
  async recheck(): Promise<void> {
    const verdict = this.#verdict
    if (verdict === undefined) return
    await Promise.all(
      [...this.#open].map(async (tracked) => {
        const holds = await verdict.holds(tracked).catch(() => false)
        if (!holds) close(tracked, 'access ended')
      }),
    )
  }

  /** Closes every socket (the process stops). */
  closeAll(): void {
    for (const tracked of this.#open) close(tracked, 'the gateway is stopping')
  }

  #attach(socket: Duplex, ws: WebSocket): void {
    const grant = this.#granted.get(socket)
    this.#granted.delete(socket)
    // Every upgrade the proxy serves passed its preHandler; one without a grant is refused.
    if (grant === undefined) {
      ws.close(POLICY_VIOLATION, 'no access decision')
      return
    }
    const tracked: Tracked = {
      ...grant,
      ws,
      timer: setTimeout(() => close(tracked, 'the session or the socket lifetime has ended'), Math.min(Math.max(0, grant.endsAt - Date.now()), MAX_DELAY_MS)),
    }
    tracked.timer.unref()
    this.#open.add(tracked)
    ws.once('close', () => {
      clearTimeout(tracked.timer)
      this.#open.delete(tracked)
      if (this.#open.size === 0) this.#stopSweep()
    })
    this.#startSweep()
  }

  #startSweep(): void {
    if (this.#sweep !== undefined) return
    this.#sweep = setInterval(() => void this.recheck(), SWEEP_MS)
    this.#sweep.unref()
  }

  #stopSweep(): void {
    clearInterval(this.#sweep)
    this.#sweep = undefined
  }
}

function close(tracked: Tracked, reason: string): void {
  if (tracked.ws.readyState === WebSocket.OPEN || tracked.ws.readyState === WebSocket.CONNECTING) tracked.ws.close(POLICY_VIOLATION, reason)
}
