import type { FastifyInstance, FastifyReply } from 'fastify'
import { GatewayError } from '../contract/errors.js'
import type { JtiReplay } from '../oidc/jti-replay.js'
import { KeysNotLoadedError } from '../oidc/provider-keys.js'
import { LogoutTokenError, verifyLogoutToken } from '../oidc/logout-token.js'
import type { Providers } from '../oidc/providers.js'
import { SECURITY_HEADERS } from '../ops/response-headers.js'
import { auditRefusal, auditSuccess } from '../ops/audit.js'
import { BACKCHANNEL_LOGOUT_PATH } from '../contract/endpoints.js'
import { systemClock } from '../lib/clock.js'
import { KeyedRateLimit, PROVIDER_PUSH_LIMIT, type RateLimitOptions } from '../lib/rate-limit.js'
import { endSelected, type RevocationList } from '../session/revocation.js'
import type { SessionSelector, SessionStore } from '../session/types.js'

// POST /api/v1/openid/backchannel-logout (OpenID Connect Back-Channel Logout 1.0, 2.5 to 2.8):
// the provider, server to server, sends a logout token as a form field; the gateway validates it
// (oidc/logout-token.ts), refuses a jti it has seen (oidc/jti-replay.ts) and ends the sessions it
// names in the session store, on every replica. 200 with no body when done, 400 with an OAuth
// error body when the token is refused (2.8), never cached. A failure on the gateway's side (the
// provider's keys or the session store cannot be reached) is a 5xx problem, so that the
// provider may retry: the token was not at fault.
//
// The logout token's `iss` picks the provider, whose keys verify it: a provider's token ends only
// that provider's sessions (2.6), and with them its Bearer tokens issued before (the revocation
// list). A rate limit per provider (lib/rate-limit.ts PROVIDER_PUSH_LIMIT, per replica) counts
// only tokens that verified and were not seen before, so no one else can spend a provider's budget: beyond it, 429 with
// Retry-After and nothing ended (the jti is not spent: the same token may come again). No
// per-client limit before that: each request costs at most one signature check (an unknown kid
// refetches the JWKS at most once per interval, see oidc/provider-keys.ts), and its body is bounded by
// MAX_BODY_BYTES.

/** A logout token is about 1 KiB; the form carries nothing else. */
export const MAX_BODY_BYTES = 16 * 1024

export interface BackchannelLogoutOptions {
  /** The logout token's `iss` selects the provider whose keys and client id verify it. */
  providers: Providers
  store: SessionStore
  replay: JtiReplay
  /**
   * The revocation list, for a store that keeps none itself (memory, Redis): the subject's Bearer
   * tokens are refused through it (session/revocation.ts endSelected).
   */
  revocations?: RevocationList
  /** Told of the sessions a logout token ended, once they are (open WebSockets close). */
  onEnded?: (selector: SessionSelector) => void
  /** Logout tokens per provider (default PROVIDER_PUSH_LIMIT on the system clock); tests lower it. */
  limit?: RateLimitOptions
}

function invalidRequest(reply: FastifyReply, description: string): FastifyReply {
  return reply.code(400).type('application/json').send({ error: 'invalid_request', error_description: description })
}

export async function backchannelLogoutRoute(app: FastifyInstance, options: BackchannelLogoutOptions): Promise<void> {
  const limit = new KeyedRateLimit(options.limit ?? { ...PROVIDER_PUSH_LIMIT, clock: systemClock })
  // 2.5: the request is a form post; any other body type is 415, a larger body 413.
  app.removeAllContentTypeParsers()
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string', bodyLimit: MAX_BODY_BYTES }, (_req, body, done) => {
    done(null, new URLSearchParams(body as string))
  })
  app.addHook('onRequest', async (_req, reply) => {
    // 2.8: the response must not be cached.
    reply.headers(SECURITY_HEADERS).header('cache-control', 'no-store')
  })

  app.post(BACKCHANNEL_LOGOUT_PATH, async (req, reply) => {
    const form = req.body instanceof URLSearchParams ? req.body : new URLSearchParams()
    const tokens = form.getAll('logout_token')
    const token = tokens[0]
    if (tokens.length !== 1 || token === undefined || token === '') {
      auditRefusal(req.log, 'backchannel-logout', {}, req.ip, 'logout_token')
      return invalidRequest(reply, 'the request must carry exactly one logout_token')
    }
    const provider = options.providers.verifierOf(token, options.providers.all)
    if (provider === undefined || provider === null) {
      auditRefusal(req.log, 'backchannel-logout', {}, req.ip, 'iss')
      return invalidRequest(reply, "the logout token's iss names no configured provider")
    }
    const { client, config } = provider
    const algorithms = client.idTokenAlgorithms
    if (algorithms === undefined) throw new GatewayError('not_ready', 'the provider metadata is not loaded yet')

    let verified
    try {
      verified = await verifyLogoutToken(token, {
        issuer: config.issuer,
        clientId: config.clientId,
        clockToleranceSeconds: config.clockToleranceSeconds,
        algorithms,
        getKey: client.keys.getKey,
      })
    } catch (err) {
      if (err instanceof LogoutTokenError) {
        auditRefusal(req.log, 'backchannel-logout', { provider: provider.name }, req.ip, err.check, err.message)
        return invalidRequest(reply, err.message)
      }
      if (err instanceof KeysNotLoadedError) throw new GatewayError('not_ready', 'the provider keys are not loaded yet', { cause: err })
      throw new GatewayError('provider_unavailable', "the provider's keys cannot be fetched", { cause: err })
    }
    const { jti, acceptableUntil } = verified
    const selector = { ...verified.selector, provider: provider.name }
    const { issuer } = config
    if (!(await options.replay.firstUse(issuer, jti, acceptableUntil))) {
      auditRefusal(req.log, 'backchannel-logout', selector, req.ip, 'jti_replay')
      return invalidRequest(reply, 'this logout token was already received (jti replayed)')
    }
    // Counted after the replay guard, so a copied token sent again spends nothing; refused, its jti
    // is released so that the provider's retry is not taken for a replay.
    const retryAfter = limit.take(provider.name)
    if (retryAfter !== undefined) {
      await options.replay.release(issuer, jti)
      // At warn as well: a provider beyond its budget is the operator's to look at (the audit line is at info).
      req.log.warn({ outcome: 'refused', check: 'rate_limit', provider: provider.name }, 'back-channel logout refused')
      auditRefusal(req.log, 'backchannel-logout', selector, req.ip, 'rate_limited')
      return reply
        .code(429)
        .header('retry-after', String(retryAfter))
        .type('application/json')
        .send({ error: 'rate_limited', error_description: 'too many logout tokens from this provider; send it again later' })
    }
    try {
      await endSelected(options.store, options.revocations, selector)
    } catch (err) {
      // Not ended: the provider's retry of this token must not count as a replay.
      await options.replay.release(issuer, jti)
      throw err
    }
    options.onEnded?.(selector)
    auditSuccess(req.log, 'backchannel-logout', selector, req.ip)
    return reply.code(200).send()
  })
}
