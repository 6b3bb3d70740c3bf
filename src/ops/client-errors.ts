import { STATUS_CODES } from 'node:http'
import type { Socket } from 'node:net'
import type { FastifyInstance, onSendHookHandler } from 'fastify'
import { GatewayError } from '../contract/errors.js'
import { PROBLEM_HEADERS } from './response-headers.js'

// What Node's HTTP parser refuses before Fastify sees a request is still answered as the
// gateway's errors are: problem+json with the security headers, and the connection closed. A
// connection whose request body was not read to its end is closed too, once answered.

interface ClientError extends Error {
  code?: string
}

/** What Node's parser refused, as status and detail; the problem code is always bad_request. */
function classify(code: string | undefined): [status: number, detail: string] {
  switch (code) {
    case 'HPE_HEADER_OVERFLOW':
      return [431, 'the request headers are too large (cookies included); clearing the cookies of this site helps']
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return [408, 'the request did not arrive in time']
    default:
      return [400, 'the request is malformed']
  }
}

/**
 * Fastify's `clientErrorHandler`: answers what Node's HTTP parser refuses before Fastify sees a
 * request (oversized headers, malformed request lines) with problem+json like every other
 * gateway error, then closes the connection, whose framing can no longer be trusted.
 */
export function clientErrorHandler(this: FastifyInstance, err: ClientError, socket: Socket): void {
  // A reset connection is gone; there is nobody to answer.
  if (err.code === 'ECONNRESET' || socket.destroyed) return
  const [status, detail] = classify(err.code)
  // Only the code: err.rawPacket holds the raw request bytes, cookies included.
  this.log.debug({ code: err.code, status }, 'client error')
  // As Node does: never write into a response already on its way (keep-alive, pipelining).
  const inFlight = (socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage
  if (socket.writable && inFlight?.headersSent !== true) {
    const body = JSON.stringify({ ...new GatewayError('bad_request', detail).toProblem(), status })
    const head = [
      `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Error'}`,
      'content-type: application/problem+json',
      `content-length: ${Buffer.byteLength(body)}`,
      'connection: close',
      ...Object.entries(PROBLEM_HEADERS).map(([name, value]) => `${name}: ${value}`),
    ]
    socket.write(`${head.join('\r\n')}\r\n\r\n${body}`)
  }
  socket.destroy(err)
}

/**
 * The `onSend` hook that closes the connection of an answer given before the request's body has
 * arrived (a 401 on a protected path, a 413, a refusal of the gateway's own endpoints): Node would
 * otherwise keep reading the rest of the body to reuse the connection, which lets a client that
 * trickles a body hold it (and a worker's socket) for as long as it likes.
 */
export const closeIfBodyUnread: onSendHookHandler = function closeIfBodyUnread(req, reply, payload, done) {
  if (!req.raw.complete) reply.header('connection', 'close')
  done(null, payload)
}
