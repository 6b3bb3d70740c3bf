import type { FastifyBaseLogger } from 'fastify'
import type { IDToken } from 'openid-client'
import { GatewayError } from '../contract/errors.js'
import type { SessionClaims } from '../contract/identity.js'
import type { Clock } from '../lib/clock.js'
import type { GithubConfig } from '../options/types.js'
import type { Tokens } from './client.js'
import { describe } from './errors.js'
import { loggableUrl, MAX_PROVIDER_BODY_BYTES, readLimited } from './fetch.js'
import { githubApiUrl } from './github.js'

// Who a GitHub user is, and whether provider.github admits them, read from GitHub's REST API
// with the user's access token at sign-in and again at each refresh (the place of an ID token
// and claim sources for an OpenID provider: routes/sign-in-flow.ts and session/refresh-grant.ts
// call resolve). GitHub's documented rules, each kept here:
//
// - Requests: `Accept: application/vnd.github+json`, `X-GitHub-Api-Version: 2022-11-28`, the
//   token as `Authorization: Bearer`, and a User-Agent, which the API requires
//   (https://docs.github.com/en/rest/using-the-rest-api/getting-started-with-the-rest-api).
// - GET /user (https://docs.github.com/en/rest/users/users#get-the-authenticated-user): `id`
//   (a number that never changes: the session's `sub`) and `login` (which a user may rename:
//   `preferred_username`), `name`.
// - GET /user/emails (https://docs.github.com/en/rest/users/emails#list-email-addresses-for-the-authenticated-user,
//   scope user:email): `email`, `primary`, `verified`. Only the primary address, and only if
//   verified, becomes `email`: a user without one is refused, since `allow.emails` and
//   `allow.emailDomains` would otherwise judge an address nobody proved to own.
// - GET /user/orgs (https://docs.github.com/en/rest/orgs/orgs#list-organizations-for-the-authenticated-user,
//   scope read:org; a GitHub App sees the organizations it is installed on): each `login` is a
//   group, as it is spelled.
// - GET /user/teams (https://docs.github.com/en/rest/teams/teams#list-teams-for-the-authenticated-user,
//   scope read:org): each team is a group `organization.login/slug`. A login never holds a `/`,
//   so an organization group and a team group never read alike.
// - GET /repos/{owner}/{repo} (https://docs.github.com/en/rest/repos/repos#get-a-repository):
//   with a user's token its `permissions` are that user's. A collaborator of a repository is who
//   may push to it, or, for a private one, read it (what oauth2-proxy's --github-repo checks
//   without an owner token); 404 means the user cannot see it. The "check if a user is a
//   repository collaborator" endpoint (https://docs.github.com/en/rest/collaborators/collaborators#check-if-a-user-is-a-repository-collaborator)
//   needs push access of the token's user, so it cannot admit a reader of a private repository.
// - Pagination (https://docs.github.com/en/rest/using-the-rest-api/using-pagination-in-the-rest-api):
//   `per_page` at most 100; a page that is not the last names the next in its `Link` header
//   (rel="next"), followed only within the API's origin and path (no request goes where an
//   answer says: a next page elsewhere fails the list), at most MAX_PAGES pages per list (the
//   rest is left out, and logged: fewer groups, never more).
// - Rate limits (https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api):
//   the primary limit answers 403 or 429 with `x-ratelimit-remaining: 0` and `x-ratelimit-reset`
//   (epoch seconds); a secondary limit answers 403 or 429 with `retry-after` (seconds). Either
//   fails the sign-in or refresh with 502 provider_unavailable and a Retry-After saying when the
//   API answers again; nothing is retried here (the user's next attempt is).
//
// Fail closed: an answer that is not what the documentation says (unreachable, 5xx, 401, not
// JSON, too large) fails the sign-in or refresh with 502 provider_unavailable, and nothing it
// said is used. A user provider.github does not admit is refused at sign-in with 403 forbidden,
// and at a refresh the session ends (refresh_token_invalid), as when a provider refuses it.

/** Items per page: the most GitHub's REST API serves. */
export const PER_PAGE = 100
/** Pages read per list: 1000 organizations or teams; more are left out, and logged. */
export const MAX_PAGES = 10
/** The REST API version the requests name (https://docs.github.com/en/rest/about-the-rest-api/api-versions). */
const API_VERSION = '2022-11-28'
const USER_AGENT = 'openid-gateway'
/** The longest Retry-After the gateway passes on (GitHub's primary limit resets within the hour). */
const MAX_RETRY_AFTER_SECONDS = 3600

type Json = Record<string, unknown>

/** The claims a GitHub user's session has, as an ID token would carry them. */
export interface GithubClaims {
  sub: string
  preferred_username: string
  name?: string
  email: string
  email_verified: true
  groups: string[]
}

/** A GitHub user provider.github does not admit: why, in words an operator reads in the log (never the user's groups). */
class NotAdmitted extends Error {
  override readonly name = 'NotAdmitted'
}

interface Answer {
  status: number
  headers: Headers
  body: unknown
}

/** GitHub's REST API for one provider, asked with each user's own token. */
export class GithubApi {
  readonly #api: string
  readonly #timeoutMs: number
  readonly #log: FastifyBaseLogger
  readonly #clock: Clock

  constructor(issuer: string, timeoutMs: number, log: FastifyBaseLogger, clock: Clock) {
    this.#api = githubApiUrl(issuer)
    this.#timeoutMs = timeoutMs
    this.#log = log
    this.#clock = clock
  }

  /** The REST API's root this provider asks. */
  get url(): string {
    return this.#api
  }

  /** GET `path` (below the API's root): 200 and 404 are answers, anything else throws (rate limits with their Retry-After). */
  async get(path: string, token: string): Promise<Answer> {
    return this.#fetch(this.#api + path, token)
  }

  /** Every item of the paginated list at `path`, following `Link: rel="next"` within the API, at most MAX_PAGES pages. */
  async list(path: string, token: string): Promise<Json[]> {
    const items: Json[] = []
    let url: string | undefined = `${this.#api}${path}${path.includes('?') ? '&' : '?'}per_page=${PER_PAGE}`
    for (let page = 0; url !== undefined; page++) {
      if (page === MAX_PAGES) {
        this.#log.warn({ call: 'github', url: loggableUrl(url), pages: MAX_PAGES }, 'GitHub list longer than the pages read: the rest is left out')
        break
      }
      const answer = await this.#fetch(url, token)
      if (answer.status !== 200 || !Array.isArray(answer.body)) throw this.#fault(url, `${loggableUrl(url)} answered HTTP ${answer.status}, not a list`)
      for (const item of answer.body as unknown[]) if (isRecord(item)) items.push(item)
      url = this.#next(answer.headers.get('link'))
    }
    return items
  }

  /** The `rel="next"` URL of a Link header (RFC 8288), when it is below the API's root. */
  #next(link: string | null): string | undefined {
    if (link === null) return undefined
    for (const part of link.split(',')) {
      const match = /^\s*<([^>]*)>\s*;(.*)$/.exec(part)
      if (match === null || !/(^|;)\s*rel="?([^";]*\s)?next(\s[^";]*)?"?\s*(;|$)/i.test(match[2] ?? '')) continue
      const next = match[1] ?? ''
      let url: URL
      try {
        url = new URL(next)
      } catch {
        throw this.#fault(this.#api, 'GitHub named a next page that is not a URL')
      }
      const root = new URL(this.#api)
      if (url.origin !== root.origin || !(url.pathname === root.pathname || url.pathname.startsWith(`${root.pathname.replace(/\/$/, '')}/`))) {
        // The user's token never goes where an answer says; the list is incomplete, so nothing of it is used.
        throw this.#fault(next, `GitHub named a next page outside its API (${loggableUrl(next)}): not followed`)
      }
      return url.href
    }
    return undefined
  }

  async #fetch(url: string, token: string): Promise<Answer> {
    let res: Response
    let text: string
    try {
      res = await fetch(url, {
        headers: { accept: 'application/vnd.github+json', authorization: `Bearer ${token}`, 'x-github-api-version': API_VERSION, 'user-agent': USER_AGENT },
        redirect: 'manual',
        signal: AbortSignal.timeout(this.#timeoutMs),
      })
      text = await readLimited(res, MAX_PROVIDER_BODY_BYTES)
    } catch (err) {
      this.#log.warn({ call: 'github', url: loggableUrl(url), ...describe(err) }, 'GitHub API unreachable')
      throw new GatewayError('provider_unavailable', `GitHub's API (${loggableUrl(url)}) could not be read`, { cause: err, logged: true })
    }
    const limited = this.#rateLimited(res)
    if (limited !== undefined) {
      this.#log.warn({ call: 'github', url: loggableUrl(url), status: res.status, retryAfterSeconds: limited }, 'GitHub API rate limit reached')
      throw new GatewayError('provider_unavailable', `GitHub's API rate limit is reached; it answers again in ${limited} s`, {
        logged: true,
        headers: { 'retry-after': String(limited) },
      })
    }
    if (res.status !== 200 && res.status !== 404) throw this.#fault(url, `${loggableUrl(url)} answered HTTP ${res.status}`, res.status)
    if (res.status === 404) return { status: 404, headers: res.headers, body: undefined }
    if (!/^application\/([a-z0-9.+-]+\+)?json\s*(;|$)/i.test(res.headers.get('content-type') ?? '')) {
      throw this.#fault(url, `${loggableUrl(url)} answered ${res.headers.get('content-type') ?? 'no content type'}, not JSON`, res.status)
    }
    try {
      return { status: 200, headers: res.headers, body: JSON.parse(text) as unknown }
    } catch {
      throw this.#fault(url, `${loggableUrl(url)} answered malformed JSON`, res.status)
    }
  }

  /** Seconds until the API answers again, when `res` is a rate limit's answer (primary or secondary); else undefined. */
  #rateLimited(res: Response): number | undefined {
    if (res.status !== 403 && res.status !== 429) return undefined
    const retryAfter = res.headers.get('retry-after')
    if (retryAfter !== null && /^\d+$/.test(retryAfter.trim())) return clampRetry(Number(retryAfter.trim()))
    if (res.headers.get('x-ratelimit-remaining')?.trim() !== '0') return undefined
    const reset = Number(res.headers.get('x-ratelimit-reset'))
    // The reset is GitHub's clock: at least a second, whatever ours says.
    return clampRetry(Number.isFinite(reset) ? Math.ceil(reset - this.#clock.now() / 1000) : 60)
  }

  #fault(url: string, message: string, status?: number): GatewayError {
    this.#log.warn({ call: 'github', url: loggableUrl(url), status }, 'GitHub API answer refused')
    return new GatewayError('provider_unavailable', message, { logged: true })
  }
}

function clampRetry(seconds: number): number {
  return Math.min(Math.max(1, Math.ceil(seconds)), MAX_RETRY_AFTER_SECONDS)
}

/** The user a GitHub access token is about, and whether provider.github admits them. */
export class GithubIdentity {
  readonly #config: GithubConfig
  readonly #api: GithubApi
  readonly #log: FastifyBaseLogger

  constructor(issuer: string, config: GithubConfig, timeoutMs: number, log: FastifyBaseLogger, clock: Clock) {
    this.#config = config
    this.#api = new GithubApi(issuer, timeoutMs, log, clock)
    this.#log = log
  }

  /**
   * `tokens` with the user's claims (GithubClaims). At a refresh, `previous` (the session's
   * claims) must be about the same user. Throws GatewayError: provider_unavailable (GitHub failed
   * or is rate-limited), forbidden at sign-in or refresh_token_invalid at a refresh (a user not
   * admitted, no verified primary email, another user).
   */
  async resolve(tokens: Tokens, previous?: SessionClaims): Promise<Tokens> {
    const refresh = previous !== undefined
    let claims: GithubClaims
    try {
      claims = await this.claims(tokens.accessToken)
      if (refresh && previous.sub !== claims.sub) throw new NotAdmitted('the refreshed token is about another GitHub user than the session')
    } catch (err) {
      if (!(err instanceof NotAdmitted)) throw err
      this.#log.warn({ call: 'github', reason: err.message, grant: refresh ? 'refresh' : 'sign-in' }, 'GitHub user refused')
      throw new GatewayError(refresh ? 'refresh_token_invalid' : 'forbidden', err.message, { logged: true })
    }
    return { ...tokens, claims: claims as unknown as IDToken }
  }

  /** The user's claims; throws NotAdmitted for a user provider.github does not admit. */
  async claims(token: string): Promise<GithubClaims> {
    const user = await this.#api.get('/user', token)
    if (user.status !== 200 || !isRecord(user.body) || typeof user.body.id !== 'number' || typeof user.body.login !== 'string') {
      throw new GatewayError('provider_unavailable', "GitHub's /user answer has no numeric id and login", { logged: false })
    }
    const login = user.body.login
    const [emails, orgs, teams] = await Promise.all([
      this.#api.list('/user/emails', token),
      this.#api.list('/user/orgs', token),
      this.#api.list('/user/teams', token),
    ])
    const primary = emails.find((e) => e.primary === true && e.verified === true && typeof e.email === 'string')
    if (primary === undefined) throw new NotAdmitted(`the GitHub account ${login} has no verified primary email`)
    const orgGroups = orgs.flatMap((o) => (typeof o.login === 'string' ? [o.login] : []))
    const teamGroups = teams.flatMap((team) => {
      const org = isRecord(team.organization) ? team.organization.login : undefined
      return typeof org === 'string' && typeof team.slug === 'string' ? [`${org}/${team.slug}`] : []
    })
    await this.#admit(login, orgGroups, teamGroups, token)
    const name = typeof user.body.name === 'string' && user.body.name !== '' ? { name: user.body.name } : {}
    return {
      sub: String(user.body.id),
      preferred_username: login,
      ...name,
      email: primary.email as string,
      email_verified: true,
      groups: [...new Set([...orgGroups, ...teamGroups])],
    }
  }

  /** Throws NotAdmitted unless a list of provider.github admits the user (any entry of any list; no list: everyone). */
  async #admit(login: string, orgs: readonly string[], teams: readonly string[], token: string): Promise<void> {
    const { organizations, teams: wantedTeams, repositories, users } = this.#config
    if (organizations.length + wantedTeams.length + repositories.length + users.length === 0) return
    // GitHub's logins and slugs are case-insensitive.
    const lower = (list: readonly string[]): Set<string> => new Set(list.map((s) => s.toLowerCase()))
    if (users.some((u) => u.toLowerCase() === login.toLowerCase())) return
    const memberOf = lower(orgs)
    if (organizations.some((o) => memberOf.has(o.toLowerCase()))) return
    const inTeams = lower(teams)
    if (wantedTeams.some((team) => inTeams.has(team.toLowerCase()))) return
    for (const repository of repositories) {
      if (await this.#collaborator(repository, token)) return
    }
    throw new NotAdmitted(`the GitHub user ${login} is in none of provider.github's organizations, teams, repositories or users`)
  }

  /** Whether the token's user may push to `repository` (owner/repo), or read it when it is private. */
  async #collaborator(repository: string, token: string): Promise<boolean> {
    const answer = await this.#api.get(`/repos/${repository.split('/').map(encodeURIComponent).join('/')}`, token)
    if (answer.status !== 200 || !isRecord(answer.body)) return false
    const permissions = isRecord(answer.body.permissions) ? answer.body.permissions : {}
    if (permissions.push === true || permissions.maintain === true || permissions.admin === true) return true
    return answer.body.private === true && permissions.pull === true
  }
}

function isRecord(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}
