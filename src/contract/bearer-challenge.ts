// The `WWW-Authenticate: Bearer` challenge of a 401 (RFC 6750 3), rendered in one place so that
// each feature adds its parameters to the same challenge rather than a second one: `error`
// (RFC 6750 3.1), `resource_metadata` (RFC 9728 5.1), and those of other extensions (RFC 9470's
// `acr_values` and `max_age`). Every value is a quoted-string (RFC 9110 11.2, 5.6.4): a `"` or
// `\` in it is escaped, so a value can never end the parameter early or add another.

/** Parameters of a Bearer challenge, in the order given; `undefined` leaves one out. */
export type BearerChallengeParams = Readonly<Record<string, string | undefined>>

const NEEDS_ESCAPE = /[\\"]/

function quoted(value: string): string {
  // The common values (URLs, codes, acr values) need no escape: no replace, no callback.
  if (!NEEDS_ESCAPE.test(value)) return `"${value}"`
  return `"${value.replace(/[\\"]/g, (c) => `\\${c}`)}"`
}

/** `Bearer`, or `Bearer name="value", …` (RFC 6750 3: auth-params after the scheme). */
export function bearerChallenge(params: BearerChallengeParams = {}): string {
  let out = ''
  for (const name in params) {
    const value = params[name]
    if (value === undefined) continue
    out = out === '' ? ` ${name}=${quoted(value)}` : `${out}, ${name}=${quoted(value)}`
  }
  return `Bearer${out}`
}
