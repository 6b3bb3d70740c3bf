import { createHash } from 'node:crypto'
import type { FastifyReply } from 'fastify'
import { escapeHtml } from '../lib/html.js'

// The frame of the few HTML pages the gateway writes for people (error pages, the signed-out
// page). They are documents, unlike the JSON answers, so they get their own headers: a CSP that
// allows exactly the one inline stylesheet below (by hash), no script at all, no fonts or images
// from anywhere, forms only towards the gateway (and the provider's end-session, where the
// sign-out form's redirect goes); every text in them is escaped.

const STYLE = `
body { font-family: system-ui, sans-serif; margin: 3rem auto; max-width: 40rem; padding: 0 1rem; color: #222; line-height: 1.5 }
.code { color: #666; font-family: ui-monospace, monospace; margin: 0 }
h1 { font-size: 1.6rem; margin: .3rem 0 1rem }
.who { border-top: 1px solid #ddd; padding-top: 1rem; margin-top: 1.5rem }
.actions { display: flex; gap: .8rem; align-items: center; flex-wrap: wrap }
.actions a, .actions button { font: inherit; padding: .45rem 1rem; border: 1px solid #2457a6; border-radius: .3rem; background: #2457a6; color: #fff; text-decoration: none; cursor: pointer }
.actions button { background: #fff; color: #2457a6 }
.actions form { margin: 0 }
.detail { color: #666; font-size: .9rem }
`
const STYLE_HASH = createHash('sha256').update(STYLE).digest('base64')

export interface PageLinks {
  /** Origins (scheme://host:port) a form on the page may be sent to, redirects included. */
  formTargets: string[]
}

export function pageHeaders(links: PageLinks): Record<string, string> {
  const formAction = links.formTargets.length === 0 ? "'none'" : [...new Set(links.formTargets)].join(' ')
  return {
    'content-type': 'text/html; charset=utf-8',
    'content-security-policy': [
      "default-src 'none'",
      `style-src 'sha256-${STYLE_HASH}'`,
      `form-action ${formAction}`,
      "frame-ancestors 'none'",
      "base-uri 'none'",
    ].join('; '),
    'x-content-type-options': 'nosniff',
    'x-frame-options': 'DENY',
    // Not no-referrer: that would make browsers send `Origin: null` with the sign-out form, and
    // the sign-out endpoint checks Origin. Only the origin is ever sent, never the path and query
    // (a callback URL carries a code and a state).
    'referrer-policy': 'strict-origin',
    'cache-control': 'no-store',
  }
}

/** A whole document; `body` must already be escaped HTML. `refreshSeconds`: the page reloads itself after that long. */
export function renderPage(title: string, body: string, refreshSeconds?: number): string {
  const refresh = refreshSeconds === undefined ? '' : `\n<meta http-equiv="refresh" content="${Math.max(0, Math.floor(refreshSeconds))}">`
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex">${refresh}
<title>${escapeHtml(title)}</title>
<style>${STYLE}</style>
</head>
<body>
<main>
${body}
</main>
</body>
</html>
`
}

/** The way on, as a link and (when signed in) a sign-out button; URLs are escaped here. */
export function actions(signInUrl: string, signInLabel: string, signOutUrl: string | undefined): string {
  const signIn = `<a href="${escapeHtml(signInUrl)}">${escapeHtml(signInLabel)}</a>`
  const signOut =
    signOutUrl === undefined ? '' : `<form method="post" action="${escapeHtml(signOutUrl)}"><button type="submit">Sign out / switch account</button></form>`
  return `<div class="actions">${signIn}${signOut}</div>`
}

export function sendPage(reply: FastifyReply, status: number, links: PageLinks, html: string): FastifyReply {
  return reply.code(status).headers(pageHeaders(links)).send(html)
}
