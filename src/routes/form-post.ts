import type { FastifyInstance, FastifyRequest } from 'fastify'
import { GatewayError } from '../contract/errors.js'

// The body of a form POST to the gateway's sign-in endpoints: the callback of a provider with
// `responseMode: form_post`, and the sign-out form of the gateway's pages.
//
// OAuth 2.0 Form Post Response Mode section 2: the authorization response's parameters are
// "encoded in the body using the application/x-www-form-urlencoded format", posted by a form the
// provider's page submits. So the callback reads them from such a body and nowhere else:
// - another content type (JSON, text, multipart) is no form post: 400, as a malformed parameter;
// - a query string beside the body is refused (400): a value there must never stand in for, or
//   be read instead of, the body's (parameter pollution), and a provider that posts has none;
// - a parameter given twice is refused like in a query (params.ts `single`);
// - the body is bounded (FORM_POST_BODY_LIMIT; beyond it 413 before it is read in full).

/**
 * The largest callback body: code, state, iss, session_state, and an error_description a provider
 * may make long. Fastify refuses a larger one with 413 as it arrives.
 */
export const FORM_POST_BODY_LIMIT = 8 * 1024

const FORM = 'application/x-www-form-urlencoded'

/**
 * Lets the routes of `app` (an encapsulated scope) receive form bodies as text; the routes that
 * want none (the sign-out form) ignore it. Installed once per scope.
 */
export function acceptFormBodies(app: FastifyInstance): void {
  if (app.hasContentTypeParser(FORM)) return
  app.addContentTypeParser(FORM, { parseAs: 'string' }, (_req, body, done) => done(null, body))
  // Any other type (multipart, made up) is read within the route's limit and set aside, so the
  // callback refuses it with the same 400 as JSON or text, instead of Fastify's 415 for some.
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_req, _body, done) => done(null, undefined))
}

/** The media type of a Content-Type header, lowercased, without its parameters. */
function mediaType(header: string | undefined): string | undefined {
  if (header === undefined) return undefined
  const semicolon = header.indexOf(';')
  return (semicolon === -1 ? header : header.slice(0, semicolon)).trim().toLowerCase()
}

/** The parameters of a form-post callback, from its body alone; throws `bad_request` as above. */
export function formPostParams(req: FastifyRequest): URLSearchParams {
  if (req.url.includes('?')) throw new GatewayError('bad_request', 'a form post callback carries its parameters in the body, not in the URL')
  const type = mediaType(req.headers['content-type'])
  // No body at all is an empty form: the callback then answers code_missing, as a GET would.
  if (type === undefined) return new URLSearchParams()
  if (type !== FORM || typeof req.body !== 'string') {
    throw new GatewayError('bad_request', `a form post callback must be sent as ${FORM}`)
  }
  return new URLSearchParams(req.body)
}
