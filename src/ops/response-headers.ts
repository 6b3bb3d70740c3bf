// Headers of every response the gateway writes itself (sign-in endpoints, problem+json errors).
// Those bodies are JSON for scripts, never documents: nothing in them may be sniffed as HTML,
// framed, or leak the URL (which may carry a code or state) through Referer. Responses of the
// upstreams are passed through untouched: their headers are the application's business.

export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'content-security-policy': "default-src 'none'; frame-ancestors 'none'",
}

/** Errors are about one request and one user: no shared or browser cache may keep them. */
export const PROBLEM_HEADERS: Readonly<Record<string, string>> = {
  ...SECURITY_HEADERS,
  'cache-control': 'no-store',
}
