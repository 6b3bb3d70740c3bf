import type { FastifyRequest } from 'fastify'
import { GatewayError } from '../contract/errors.js'

// Query parameters of the sign-in endpoints are read from the raw query string, not Fastify's
// parsed `req.query`, because a parameter given twice must be refused rather than silently
// turned into an array or collapsed to one value (parameter pollution).

export function queryOf(req: FastifyRequest): URLSearchParams {
  const url = req.url
  const q = url.indexOf('?')
  return new URLSearchParams(q === -1 ? '' : url.slice(q + 1))
}

/** The single value of `name`, `undefined` when absent; a repeated parameter is a 400. */
export function single(params: URLSearchParams, name: string): string | undefined {
  const values = params.getAll(name)
  if (values.length > 1) throw new GatewayError('bad_request', `the parameter ${name} is given more than once`)
  return values[0]
}

/** `performRedirect`: 1/true or 0/false, case-insensitive; absent means true; anything else is a 400. */
export function parseFlag(name: string, value: string | undefined, absent: boolean): boolean {
  if (value === undefined) return absent
  switch (value.toLowerCase()) {
    case '1':
    case 'true':
      return true
    case '0':
    case 'false':
      return false
    default:
      throw new GatewayError('bad_request', `${name} must be 1, true, 0 or false`)
  }
}
