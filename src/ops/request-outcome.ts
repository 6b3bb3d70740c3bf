import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify'
import type { ProblemCode } from '../contract/errors.js'
import { isGatewayPath } from '../contract/endpoints.js'
import { loggedUser } from '../contract/identity.js'
import type { AccessLog } from './access-log.js'
import { GATEWAY_ROUTE, NO_ROUTE, type GatewayMetrics } from './metrics.js'
import { traceFields } from './request-tracing.js'

// Each request's outcome, recorded once it is answered: its metrics (metrics.ts) and its one line
// (access-log.ts), with what the routes said of it on the reply (the problem code the gateway
// answered with, a check's own fields). The line is written here and not by Fastify's request
// logging (off), so that it never carries a header, cookie or token.

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The upstream a proxied route serves (the metrics' route label). */
    upstream?: string
  }
  interface FastifyReply {
    /** The problem code the gateway answered with, if any (metrics). */
    problemCode: ProblemCode | undefined
    /** Fields a route adds to the request's one log line (forward-auth: the request it checked). */
    logFields: Record<string, unknown> | undefined
  }
}

/** Declares `reply.problemCode` and `reply.logFields` (undefined until set). Call once, on the root instance. */
export function decorateOutcome(app: FastifyInstance): void {
  app.decorateReply('problemCode', undefined)
  app.decorateReply('logFields', undefined)
}

/** The `onResponse` hook that counts the request (metrics.ts) and writes its line (access-log.ts). */
export function recordOutcome(metrics: GatewayMetrics, accessLog: AccessLog) {
  return function recordOutcome(req: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void {
    // Fastify builds routeOptions afresh at each read: read once.
    const { config, url: routeUrl } = req.routeOptions
    const route = config.upstream ?? (isGatewayPath(req.url) ? GATEWAY_ROUTE : NO_ROUTE)
    metrics.observeRequest({
      route,
      method: req.method,
      status: reply.statusCode,
      seconds: reply.elapsedTime / 1000,
      routeUrl,
      code: reply.problemCode,
    })
    accessLog.write({
      reqId: req.id,
      method: req.method,
      url: req.url,
      status: reply.statusCode,
      ms: reply.elapsedTime,
      ip: req.ip,
      sub: req.identity?.claims.sub,
      user: loggedUser(req.identity),
      fields: reply.logFields,
      trace: traceFields(req),
    })
    done()
  }
}
