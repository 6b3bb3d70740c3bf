// The demo upstream: an application that knows nothing of OpenID and shows what the gateway told
// it. Every header value shown is attacker-controlled (a client can send anything the gateway
// fails to strip), so all of it is HTML-escaped.
//
// It also lists the names of the cookies it receives, each with whose it is. Cookies do not
// provide isolation by port (RFC 6265 8.5): the development provider, on the same loopback host
// as the gateway, has its cookies sent to the gateway and on to this application, where a
// newcomer would take its `_session` for the gateway's session. The gateway's own cookies never
// arrive (it removes them from every request it forwards), and the page says so.

import { createHash } from 'node:crypto'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import { ENDPOINTS } from '../contract/endpoints.js'
import { escapeHtml } from '../lib/html.js'
import { listen } from './listen.js'

export interface DemoUpstreamOptions {
  host?: string
  /** 0 (default) picks an ephemeral port. */
  port?: number
}

export interface DemoUpstream {
  url: string
  port: number
  /** Tells the page whose the cookies it receives are, once the provider and the gateway exist. */
  labelCookies(owners: DemoCookieOwners): void
  close(): Promise<void>
}

/** Who set a cookie the page may receive, besides the application itself. */
export interface DemoCookieOwners {
  /** The development OpenID provider: its URL, and whether a cookie name is one of its cookies. */
  provider: { url: string; owns: (name: string) => boolean }
  /** The gateway: its cookies' base name (`cookies.name`), and whether a cookie name is one of its cookies. */
  gateway: { name: string; owns: (name: string) => boolean }
}

const IDENTITY_HEADERS = ['x-forwarded-user', 'x-forwarded-email', 'x-forwarded-groups', 'x-forwarded-preferred-username']
const FORWARDING_HEADERS = ['x-forwarded-for', 'x-forwarded-proto', 'x-forwarded-host']

// No user data is ever interpolated into this script (only the gateway's fixed endpoint paths); it is
// static so its hash can pin it in the CSP.
const SCRIPT = `
const out = document.getElementById('result')
document.getElementById('refresh').addEventListener('click', async () => {
  out.textContent = 'Refreshing...'
  try {
    const res = await fetch('${ENDPOINTS.refresh.path}', { credentials: 'same-origin' })
    out.textContent = res.ok
      ? 'Refresh: ' + res.status + ' ' + res.statusText + ', a new access token was issued (not shown).'
      : 'Refresh: ' + res.status + ' ' + res.statusText
  } catch (err) {
    out.textContent = 'Refresh failed: ' + err
  }
})
document.getElementById('logout').addEventListener('click', async () => {
  out.textContent = 'Signing out...'
  try {
    const res = await fetch('${ENDPOINTS.logout.path}', { method: 'DELETE', credentials: 'same-origin' })
    let next = ''
    if (res.ok) {
      const body = await res.json()
      if (typeof body.value === 'string') next = body.value
    }
    if (/^https?:\\/\\//i.test(next)) location.href = next
    else location.reload()
  } catch (err) {
    out.textContent = 'Sign-out failed: ' + err
  }
})
`
const SCRIPT_HASH = createHash('sha256').update(SCRIPT).digest('base64')
const CSP = [
  "default-src 'none'",
  "style-src 'unsafe-inline'",
  `script-src 'sha256-${SCRIPT_HASH}'`,
  "connect-src 'self'",
  "form-action 'none'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
].join('; ')

const STYLE = `
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 52rem; color: #222 }
table { border-collapse: collapse; width: 100% }
th, td { text-align: left; padding: .35rem .6rem; border-bottom: 1px solid #ddd; vertical-align: top }
th { width: 18rem; font-weight: 600 }
td { font-family: ui-monospace, monospace; word-break: break-all }
td.owner { font-family: system-ui, sans-serif; word-break: normal }
.absent { color: #999; font-style: italic; font-family: system-ui, sans-serif }
button { font-size: 1rem; padding: .4rem 1rem; margin-right: .5rem }
#result { margin-top: 1rem; min-height: 1.5rem }
`

function headerValue(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name]
  if (value === undefined) return undefined
  return Array.isArray(value) ? value.join(', ') : value
}

function cookieNames(req: IncomingMessage): string[] {
  const header = req.headers.cookie
  if (header === undefined) return []
  return header
    .split(';')
    .map((pair) => pair.split('=', 1)[0]?.trim() ?? '')
    .filter((name) => name !== '')
}

function cookieOwner(name: string, owners: DemoCookieOwners | undefined): string {
  if (owners === undefined) return 'not known to this page'
  if (owners.gateway.owns(name)) return "the gateway's (it should have removed it: report this)"
  if (owners.provider.owns(name)) return `the OpenID provider's (${owners.provider.url}), not the gateway's`
  return "neither the gateway's nor the provider's: this application's, or another one's on this host"
}

/** The cookies received, by name (never a value), each with whose it is. */
function cookieSection(req: IncomingMessage, owners: DemoCookieOwners | undefined): string {
  const names = cookieNames(req)
  const gateway =
    owners === undefined
      ? "The gateway's own cookies never arrive here: it removes them from every request it forwards."
      : `The gateway's own cookies (named after <code>${escapeHtml(owners.gateway.name)}</code>, its <code>cookies.name</code>) never arrive here: it removes them from every request it forwards.`
  const provider =
    owners === undefined
      ? ''
      : ` A browser sends a host's cookies to every port of it, so the cookies of the development OpenID provider, on the same host (${escapeHtml(owners.provider.url)}), reach the gateway and this application too; a real provider on a host of its own sends none here.`
  const rows = names.map((name) => `<tr><th>${escapeHtml(name)}</th><td class="owner">${escapeHtml(cookieOwner(name, owners))}</td></tr>`)
  const table = rows.length === 0 ? '<p><span class="absent">No cookies received.</span></p>' : `<table id="cookies">${rows.join('\n')}</table>`
  return `<h2>Cookies received</h2>
<p>Names only, never their values. ${gateway}${provider}</p>
${table}`
}

function row(name: string, value: string | undefined): string {
  const cell = value === undefined ? '<span class="absent">not received</span>' : escapeHtml(value)
  return `<tr><th>${escapeHtml(name)}</th><td>${cell}</td></tr>`
}

function headerTable(req: IncomingMessage): string {
  const rows = [
    ...IDENTITY_HEADERS.map((name) => row(name, headerValue(req, name))),
    // Only whether it came, never the token itself: this page is for looking at, not for leaking.
    row('authorization', req.headers.authorization === undefined ? undefined : 'present (value hidden)'),
    ...FORWARDING_HEADERS.map((name) => row(name, headerValue(req, name))),
  ]
  return `<table>${rows.join('\n')}</table>`
}

function page(title: string, body: string, withScript: boolean): string {
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}</title>
<style>${STYLE}</style>
</head>
<body>
${body}
${withScript ? `<script>${SCRIPT}</script>` : ''}
</body>
</html>
`
}

function appPage(req: IncomingMessage, owners: DemoCookieOwners | undefined): string {
  const user = headerValue(req, 'x-forwarded-user')
  return page(
    'openid-gateway demo upstream',
    `
<h1>openid-gateway demo upstream</h1>
<p>${user === undefined ? 'No identity headers arrived.' : `Signed in as <strong>${escapeHtml(user)}</strong>.`}
This application knows nothing of OpenID Connect: it only sees what the gateway forwards.</p>
<p>Request: <code>${escapeHtml(req.method ?? 'GET')} ${escapeHtml(req.url ?? '/')}</code></p>
<h2>Headers received from the gateway</h2>
${headerTable(req)}
${cookieSection(req, owners)}
<p>
<button id="refresh" type="button">Refresh token</button>
<button id="logout" type="button">Log out</button>
</p>
<div id="result" role="status"></div>
<p><a href="/public/">A public page</a> (no sign-in needed).</p>
`,
    true,
  )
}

function publicPage(req: IncomingMessage, owners: DemoCookieOwners | undefined): string {
  return page(
    'openid-gateway demo upstream: public page',
    `
<h1>Public page, no sign-in needed</h1>
<p>The gateway forwards this path without asking anyone to sign in, and without reading any
session: no identity headers reach it, even when you are signed in (the gateway removes any a
client sends itself). A path that should see who is signed in, without requiring a sign-in, belongs
to an upstream with <code>auth: optional</code>.</p>
<h2>Headers received from the gateway</h2>
${headerTable(req)}
${cookieSection(req, owners)}
<p><a href="/">Back to the protected page</a></p>
`,
    false,
  )
}

function wantsJson(req: IncomingMessage): boolean {
  const accept = req.headers.accept ?? ''
  return /\bapplication\/json\b/i.test(accept) && !/\btext\/html\b/i.test(accept)
}

function handle(req: IncomingMessage, res: ServerResponse, owners: DemoCookieOwners | undefined): void {
  const path = new URL(req.url ?? '/', 'http://upstream.invalid').pathname
  res.setHeader('cache-control', 'no-store')
  res.setHeader('x-content-type-options', 'nosniff')
  if (path === '/echo' || wantsJson(req)) {
    res.setHeader('content-type', 'application/json; charset=utf-8')
    res.end(JSON.stringify({ method: req.method, url: req.url, headers: req.headers }))
    return
  }
  res.setHeader('content-type', 'text/html; charset=utf-8')
  res.setHeader('content-security-policy', CSP)
  res.setHeader('referrer-policy', 'no-referrer')
  res.end(req.method === 'HEAD' ? undefined : path.startsWith('/public/') || path === '/public' ? publicPage(req, owners) : appPage(req, owners))
}

export async function startDemoUpstream(options: DemoUpstreamOptions = {}): Promise<DemoUpstream> {
  const host = options.host ?? '127.0.0.1'
  let owners: DemoCookieOwners | undefined
  const server: Server = createServer((req, res) => handle(req, res, owners))
  const port = await listen(server, options.port ?? 0, host)
  let closing: Promise<void> | undefined
  return {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${port}`,
    port,
    labelCookies(given) {
      owners = given
    },
    close() {
      closing ??= new Promise<void>((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      })
      return closing
    },
  }
}
