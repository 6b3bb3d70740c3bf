import type { CookieSerializeOptions } from '@fastify/cookie'
import type { FastifyReply, FastifyRequest } from 'fastify'
import fc from 'fast-check'
import t from 'tap'
import type { CookiesConfig } from '#src/options/types'
import { GatewayError } from '#src/contract/errors'
import { systemClock } from '#src/lib/clock'
import { CookieCipher } from '#src/session/cipher'
import { CALLBACK_PATH, SIGN_IN_PATH } from '#src/contract/endpoints'
import { CHUNK_CHARS, type CookieRole, GatewayCookies, MAX_CHUNKS } from '#src/session/cookies'

// GatewayCookies at the cookie level: whatever a browser (or an attacker) sends, reading yields
// "nothing" or exactly what the gateway wrote, never an exception.

const SECRET = 'cookie-secret-0123456789abcdef-0123456789'
const ROLES: CookieRole[] = ['session', 'credentials']
const LATER = Math.floor(Date.now() / 1000) + 3600
/** A sign-in transaction, as the redirect endpoint writes it. */
const TX = { nonce: 'n', codeVerifier: 'v' }

interface SetCookie {
  name: string
  value: string
  options: CookieSerializeOptions
}

function codec(config: Partial<CookiesConfig> = {}): { cookies: GatewayCookies; cipher: CookieCipher } {
  const cipher = new CookieCipher([SECRET], systemClock)
  const cookies = new GatewayCookies({ name: 'ogw', secrets: [SECRET], secure: false, sameSite: 'lax', credentialsPath: SIGN_IN_PATH, ...config }, cipher)
  return { cookies, cipher }
}

/** A request carrying exactly these cookies, parsed the way @fastify/cookie leaves them. */
function request(jar: Record<string, string>): FastifyRequest {
  const cookies: Record<string, string> = Object.create(null) as Record<string, string>
  for (const [name, value] of Object.entries(jar)) cookies[name] = value
  return { cookies } as unknown as FastifyRequest
}

/** A reply that records Set-Cookie calls. */
function reply(): { reply: FastifyReply; set: SetCookie[] } {
  const set: SetCookie[] = []
  const fake = {
    setCookie(name: string, value: string, options: CookieSerializeOptions) {
      set.push({ name, value, options })
      return fake
    },
  }
  return { reply: fake as unknown as FastifyReply, set }
}

/** The jar after a browser applied these Set-Cookie calls (Max-Age 0 deletes). */
function apply(jar: Record<string, string>, set: SetCookie[]): Record<string, string> {
  const out = { ...jar }
  for (const c of set) {
    if (c.options.maxAge === 0) delete out[c.name]
    else out[c.name] = c.value
  }
  return out
}

/** Data of the given shape whose sealed value has exactly `length` characters. */
function dataSealedTo(cipher: CookieCipher, role: CookieRole, length: number): { p: string } {
  for (let pad = Math.max(0, Math.floor((length * 3) / 4) - 200); pad < length; pad++) {
    const data = { p: 'a'.repeat(pad) }
    const size = cipher.seal(role, data, LATER).length
    if (size === length) return data
    if (size > length) break
  }
  throw new Error(`no data seals to exactly ${length} characters`)
}

const normalizeJson = (value: unknown): unknown => JSON.parse(JSON.stringify(value)) as unknown

t.test('write then read returns the data, for each role', async (t) => {
  const { cookies } = codec()
  for (const role of ROLES) {
    const data = { sub: 'alice', n: 1, list: ['a', 'b'], nested: { ok: true } }
    const { reply: r, set } = reply()
    cookies.write(request({}), r, role, data, LATER)
    t.equal(set.length, 1, `${role}: one cookie`)
    t.same(cookies.read(request(apply({}, set)), role), data, `${role}: round trip`)
    const other = role === 'session' ? 'credentials' : 'session'
    t.equal(cookies.read(request(apply({}, set)), other), undefined, `${role}: not readable as ${other}`)
  }
})

t.test('names and attributes', async (t) => {
  const plain = reply()
  codec().cookies.write(request({}), plain.reply, 'session', 1, LATER)
  codec().cookies.write(request({}), plain.reply, 'credentials', 1, LATER)
  t.strictSame(
    plain.set.map((c) => [c.name, c.options.path]),
    [
      ['ogw', '/'],
      ['ogw_cred', SIGN_IN_PATH],
    ],
  )
  for (const c of plain.set) {
    t.equal(c.options.httpOnly, true)
    t.equal(c.options.sameSite, 'lax')
    t.ok(typeof c.options.maxAge === 'number' && c.options.maxAge > 3500 && c.options.maxAge <= 3600, 'Max-Age until expiresAt')
  }
  const secure = reply()
  const { cookies } = codec({ secure: true, sameSite: 'strict' })
  cookies.write(request({}), secure.reply, 'session', 1, LATER)
  cookies.write(request({}), secure.reply, 'credentials', 1, LATER)
  cookies.writeTransaction(request({}), secure.reply, 'state-1', TX, 600)
  t.match(
    secure.set.map((c) => c.name),
    ['__Host-ogw', '__Secure-ogw_cred', '__Host-ogw_txb', /^__Secure-ogw_tx_[0-9a-z]{7}state-1$/],
  )
  t.ok(secure.set.every((c) => c.options.secure === true))
  t.ok(secure.set.filter((c) => c.name !== '__Host-ogw_txb').every((c) => c.options.sameSite === 'strict'))
  t.equal(secure.set[2]?.options.sameSite, 'none', 'the binding comes back with a form_post callback too')
  const domain = reply()
  codec({ secure: true, domain: 'example.com' }).cookies.write(request({}), domain.reply, 'session', 1, LATER)
  t.equal(domain.set[0]?.name, '__Secure-ogw', '__Host- is impossible with a Domain')
  t.equal(domain.set[0]?.options.domain, 'example.com')
})

t.test('credentialsPath /: the credentials cookie travels everywhere, bound to the origin when secure', async (t) => {
  const plain = reply()
  codec({ credentialsPath: '/' }).cookies.write(request({}), plain.reply, 'credentials', 1, LATER)
  t.strictSame(
    plain.set.map((c) => [c.name, c.options.path]),
    [['ogw_cred', '/']],
  )
  const secure = reply()
  codec({ credentialsPath: '/', secure: true }).cookies.write(request({}), secure.reply, 'credentials', 1, LATER)
  t.strictSame(
    secure.set.map((c) => [c.name, c.options.path]),
    [['__Host-ogw_cred', '/']],
  )
  const domain = reply()
  codec({ credentialsPath: '/', secure: true, domain: 'example.com' }).cookies.write(request({}), domain.reply, 'credentials', 1, LATER)
  t.equal(domain.set[0]?.name, '__Secure-ogw_cred', '__Host- is impossible with a Domain')
})

t.test('both credentials cookie names are stripped, whichever path is configured', async (t) => {
  for (const credentialsPath of ['/', SIGN_IN_PATH] as const) {
    const { cookies } = codec({ credentialsPath, secure: true })
    for (const name of ['__Host-ogw_cred', '__Secure-ogw_cred', '__Host-ogw_cred_2', '__Secure-ogw_cred_1', '__Host-ogw']) {
      t.ok(cookies.isGatewayCookieName(name), `${credentialsPath}: ${name}`)
    }
    t.notOk(cookies.isGatewayCookieName('ogw_cred_x'))
  }
})

t.test('chunking boundaries', async (t) => {
  const { cookies, cipher } = codec()

  t.test('a value of exactly one chunk is one cookie without a chunk marker', async (t) => {
    const data = dataSealedTo(cipher, 'session', CHUNK_CHARS)
    const { reply: r, set } = reply()
    cookies.write(request({}), r, 'session', data, LATER)
    t.strictSame(
      set.map((c) => c.name),
      ['ogw'],
    )
    t.equal(set[0]?.value.length, CHUNK_CHARS)
    t.notOk(set[0]?.value.includes('~'))
    t.same(cookies.read(request(apply({}, set)), 'session'), data)
  })

  t.test('one character more is two cookies, the first marked 2~', async (t) => {
    const data = dataSealedTo(cipher, 'session', CHUNK_CHARS + 1)
    const { reply: r, set } = reply()
    cookies.write(request({}), r, 'session', data, LATER)
    t.strictSame(
      set.map((c) => c.name),
      ['ogw', 'ogw_1'],
    )
    t.match(set[0]?.value, /^2~/)
    t.equal(set[0]?.value.length, CHUNK_CHARS + 2)
    t.equal(set[1]?.value.length, 1)
    t.same(cookies.read(request(apply({}, set)), 'session'), data)
    const jar = apply({}, set)
    delete jar.ogw_1
    t.equal(cookies.read(request(jar), 'session'), undefined, 'a missing chunk is no value')
  })

  t.test('MAX_CHUNKS chunks fit; one character more is refused and nothing is set', async (t) => {
    const fits = dataSealedTo(cipher, 'session', MAX_CHUNKS * CHUNK_CHARS)
    const ok = reply()
    cookies.write(request({}), ok.reply, 'session', fits, LATER)
    t.strictSame(
      ok.set.map((c) => c.name),
      ['ogw', ...Array.from({ length: MAX_CHUNKS - 1 }, (_, i) => `ogw_${i + 1}`)],
    )
    t.same(cookies.read(request(apply({}, ok.set)), 'session'), fits)

    const tooLarge = dataSealedTo(cipher, 'session', MAX_CHUNKS * CHUNK_CHARS + 1)
    const refused = reply()
    t.throws(() => cookies.write(request({}), refused.reply, 'session', tooLarge, LATER), { code: 'session_too_large' })
    t.strictSame(refused.set, [])
  })

  t.test('a smaller value expires the chunks of a larger one the browser still holds', async (t) => {
    const big = reply()
    cookies.write(request({}), big.reply, 'session', dataSealedTo(cipher, 'session', 2 * CHUNK_CHARS + 5), LATER)
    const jar = apply({}, big.set)
    t.strictSame(Object.keys(jar).sort(), ['ogw', 'ogw_1', 'ogw_2'])
    const small = reply()
    cookies.write(request(jar), small.reply, 'session', { small: true }, LATER)
    const after = apply(jar, small.set)
    t.strictSame(Object.keys(after), ['ogw'])
    t.same(cookies.read(request(after), 'session'), { small: true })
  })
})

t.test('clear expires the cookie and every chunk name, on the right path', async (t) => {
  const { cookies } = codec({ domain: 'example.com' })
  for (const role of ROLES) {
    const { reply: r, set } = reply()
    cookies.clear(r, role)
    const base = role === 'session' ? 'ogw' : 'ogw_cred'
    t.strictSame(
      set.map((c) => c.name),
      [base, ...Array.from({ length: MAX_CHUNKS - 1 }, (_, i) => `${base}_${i + 1}`)],
    )
    for (const c of set) {
      t.equal(c.value, '')
      t.equal(c.options.maxAge, 0)
      t.equal(c.options.expires?.getTime(), 0)
      t.equal(c.options.path, role === 'session' ? '/' : SIGN_IN_PATH)
      t.equal(c.options.domain, 'example.com', 'the same domain, or the browser keeps the cookie')
    }
  }
})

t.test('transaction cookies: one per state, each opening only for its own state', async (t) => {
  const { cookies } = codec()
  const a = 'AAAAAAAAAAAAAAAAAAAA-state-a'
  const b = 'BBBBBBBBBBBBBBBBBBBB-state-b'
  // Two tabs: two redirects, the second with what the first set.
  const first = reply()
  cookies.writeTransaction(request({}), first.reply, a, { nonce: 'a', codeVerifier: 'va' }, 600)
  const second = reply()
  cookies.writeTransaction(request(apply({}, first.set)), second.reply, b, { nonce: 'b', codeVerifier: 'vb' }, 600)
  const set = [...first.set, ...second.set].filter((c) => c.name !== 'ogw_txb')
  t.equal(set.length, 2)
  t.not(set[0]?.name, set[1]?.name, 'two tabs, two cookies')
  const nonceOf = (set: typeof first.set): string | undefined => set.find((c) => c.name === 'ogw_txb')?.value.split('.')[0]
  t.equal(nonceOf(first.set), nonceOf(second.set), 'one binding per browser')
  for (const c of set) {
    t.equal(c.options.path, CALLBACK_PATH)
    t.equal(c.options.maxAge, 600)
    t.equal(c.options.httpOnly, true)
  }
  const jar = apply(apply({}, first.set), second.set)
  t.same(cookies.readTransaction(request(jar), a), { nonce: 'a', codeVerifier: 'va' })
  t.same(cookies.readTransaction(request(jar), b), { nonce: 'b', codeVerifier: 'vb' })
  t.equal(cookies.readTransaction(request(jar), 'CCCC'), undefined)

  // States sharing the 16 characters the name is made of share a cookie name, but the seal is
  // bound to the whole state.
  const sibling = `${a.slice(0, 16)}-another-ending`
  t.equal(cookies.readTransaction(request(jar), sibling), undefined)

  const cleared = reply()
  cookies.clearTransaction(request(jar), cleared.reply, a)
  t.strictSame(
    cleared.set.filter((c) => c.name !== 'ogw_txb').map((c) => [c.name, c.options.path, c.options.maxAge]),
    [[set[0]?.name, CALLBACK_PATH, 0]],
  )
  t.notMatch(cleared.set.find((c) => c.name === 'ogw_txb')?.value, set[0]?.name.slice('ogw_tx_'.length) ?? '', 'taken off the binding')
  const after = apply(jar, cleared.set)
  t.equal(cookies.readTransaction(request(after), a), undefined)
  t.same(cookies.readTransaction(request(after), b), { nonce: 'b', codeVerifier: 'vb' }, 'the other tab is untouched')

  const odd = reply()
  cookies.writeTransaction(request({}), odd.reply, 'a;b=c d\u00e9\n', TX, 600)
  t.match(odd.set[1]?.name, /^ogw_tx_[A-Za-z0-9_-]*$/, 'only cookie-name-safe characters of the state')
  t.same(cookies.readTransaction(request(apply({}, odd.set)), 'a;b=c d\u00e9\n'), TX)
})

t.test('isGatewayCookie covers every name the gateway sets', async (t) => {
  const { cookies } = codec()
  for (const name of ['ogw', 'ogw_1', 'ogw_2', 'ogw_cred', 'ogw_cred_1', 'ogw_tx_abc']) t.ok(cookies.isGatewayCookieName(name), name)
  for (const name of ['ogwx', 'app', 'ogw_cred2', 'session']) t.notOk(cookies.isGatewayCookieName(name), name)
})

t.test('every name the gateway could have set is its own: each prefix, role and chunk, of the current and former base names', async (t) => {
  const cipher = new CookieCipher([SECRET], systemClock)
  const cookies = new GatewayCookies({ name: 'gw2', secrets: [SECRET], secure: false, sameSite: 'lax', credentialsPath: '/' }, cipher, ['ogw'])
  for (const base of ['gw2', 'ogw']) {
    for (const prefix of ['', '__Host-', '__Secure-']) {
      for (const name of [`${prefix}${base}`, `${prefix}${base}_2`, `${prefix}${base}_cred`, `${prefix}${base}_cred_1`, `${prefix}${base}_tx_abc`]) {
        t.ok(cookies.isGatewayCookieName(name), name)
      }
    }
  }
  t.notOk(cookies.isGatewayCookieName('other'), 'a name never used')
  t.notOk(
    new GatewayCookies({ name: 'gw2', secrets: [SECRET], secure: false, sameSite: 'lax', credentialsPath: '/' }, cipher).isGatewayCookieName('ogw'),
    'a former name only when told',
  )
})

t.test("a gateway seal is the gateway's cookie whatever its name (a rename by restart), chunked or not", async (t) => {
  const { cookies, cipher } = codec()
  const sealed = cipher.seal('session:ogw', { s: 1 }, LATER)
  t.ok(cookies.isGatewayCookie('renamed', sealed), 'a seal of a configured key')
  t.ok(cookies.isGatewayCookie('renamed', `2~${sealed.slice(0, 100)}`), "a chunked seal's first part")
  t.notOk(cookies.isGatewayCookie('app', 'abcdefgh.xyz'), 'a value of the same shape under an unknown key id')
  t.notOk(
    new GatewayCookies(
      { name: 'x', secrets: ['another-secret-0123456789abcdef-0123456789'], secure: false, sameSite: 'lax', credentialsPath: '/' },
      new CookieCipher(['another-secret-0123456789abcdef-0123456789'], systemClock),
    ).isGatewayCookie('renamed', sealed),
    'a seal of a key no longer configured',
  )
})

t.test('a seal is bound to its cookie name: copied under another name, it does not open', async (t) => {
  const cipher = new CookieCipher([SECRET], systemClock)
  const config: Omit<CookiesConfig, 'name'> = { secrets: [SECRET], secure: false, sameSite: 'lax', credentialsPath: '/' }
  const before = new GatewayCookies({ ...config, name: 'ogw' }, cipher)
  const after = new GatewayCookies({ ...config, name: 'gw2' }, cipher)
  const written = reply()
  before.write(request({}), written.reply, 'session', { s: 1 }, LATER)
  const value = written.set[0]?.value ?? ''
  t.same(before.read(request({ ogw: value }), 'session'), { s: 1 }, 'opens under its own name')
  t.equal(after.read(request({ gw2: value }), 'session'), undefined, 'not under the new name')
})

t.test('expireFormer: gateway cookies the configuration does not use are expired once seen', async (t) => {
  const cipher = new CookieCipher([SECRET], systemClock)
  const cookies = new GatewayCookies({ name: 'gw2', secrets: [SECRET], secure: false, sameSite: 'lax', credentialsPath: SIGN_IN_PATH }, cipher, ['ogw'])
  const out = reply()
  cookies.expireFormer(request({ gw2: 'x', gw2_cred: 'x', ogw: 'x', ogw_cred_1: 'x', '__Host-gw2': 'x', app: 'x', ogw_tx_abc: 'x' }), out.reply)
  const expired = out.set.map((c) => [c.name, c.options.path, c.options.maxAge, c.options.secure])
  t.same(
    expired,
    [
      ['ogw', '/', 0, false],
      ['ogw', SIGN_IN_PATH, 0, false],
      ['ogw_cred_1', '/', 0, false],
      ['ogw_cred_1', SIGN_IN_PATH, 0, false],
      ['__Host-gw2', '/', 0, true],
    ],
    'former names at both paths; a __Host- cookie as its prefix requires; current, foreign and transaction cookies untouched',
  )
})

t.test('expireFormer on a jar: the jar read from the Cookie header expires the same former names, and a jar without any is left alone', async (t) => {
  const cipher = new CookieCipher([SECRET], systemClock)
  const cookies = new GatewayCookies({ name: 'gw2', secrets: [SECRET], secure: false, sameSite: 'lax', credentialsPath: SIGN_IN_PATH }, cipher, ['ogw'])
  const withFormer = reply()
  cookies.expireFormer({ url: '/', cookies: cookies.jar('app=1; gw2=x; ogw=y; ogw_tx_abc=z') } as unknown as FastifyRequest, withFormer.reply)
  t.same(
    withFormer.set.map((c) => [c.name, c.options.path]),
    [
      ['ogw', '/'],
      ['ogw', SIGN_IN_PATH],
    ],
    'the former name the header brought',
  )
  const current = reply()
  const jar = cookies.jar('app=1; gw2=x; gw2_cred=y; ogw_tx_abc=z')
  cookies.expireFormer({ url: '/', cookies: jar } as unknown as FastifyRequest, current.reply)
  t.same(current.set, [], 'current, foreign and transaction cookies: nothing expired')
  t.same(Object.keys(jar), ['gw2', 'gw2_cred', 'ogw_tx_abc'], "the jar's names are the cookies' alone")
})

// --- properties ---

const NAMES = ['ogw', 'ogw_cred', ...Array.from({ length: 9 }, (_, i) => [`ogw_${i + 1}`, `ogw_cred_${i + 1}`]).flat()]

const cookieName = fc.oneof(
  fc.constantFrom(...NAMES),
  fc.string({ unit: fc.constantFrom(...'abcdefABCDEF0123456789-_'), maxLength: 16 }).map((s) => `ogw_tx_${s}`),
  fc.string({ maxLength: 20 }),
)

/** Values a browser or an attacker may send: chunk markers, sealed-looking values, anything. */
const cookieValue: fc.Arbitrary<string> = fc.oneof(
  fc.string({ maxLength: 60 }),
  fc.string({ unit: 'binary', maxLength: 30 }),
  fc.tuple(fc.integer({ min: -1, max: 12 }), fc.string({ maxLength: 60 })).map(([n, s]) => `${n}~${s}`),
  fc
    .tuple(fc.string({ unit: fc.constantFrom(...'ABCDEFabcdef0123456789_-'), minLength: 8, maxLength: 8 }), fc.base64String({ maxLength: 80 }))
    .map(([id, b]) => `${id}.${b}`),
  fc.constantFrom('', '~', '2~', '9~', '0~x', '3~'),
)

/** A cookie value made from the values the gateway really wrote: whole, sliced, re-marked. */
type Piece = { from: number; start: number; end: number; marker: number | null }
type Forged = string | Piece

const forgedValue: fc.Arbitrary<Forged> = fc.oneof(
  cookieValue,
  fc.record({ from: fc.nat(), start: fc.nat(), end: fc.nat(), marker: fc.option(fc.integer({ min: 0, max: 9 })) }),
)

function resolvePiece(value: Forged, real: readonly string[]): string {
  if (typeof value === 'string' || real.length === 0) return typeof value === 'string' ? value : ''
  const source = real[value.from % real.length] ?? ''
  const a = value.start % (source.length + 1)
  const b = value.end % (source.length + 1)
  const slice = value.start % 3 === 0 ? source : source.slice(Math.min(a, b), Math.max(a, b))
  return value.marker === null ? slice : `${value.marker}~${slice}`
}

const jar: fc.Arbitrary<Record<string, string>> = fc.dictionary(cookieName, cookieValue, { maxKeys: 25 })
const forgedJar: fc.Arbitrary<Array<[string, Forged]>> = fc.array(fc.tuple(cookieName, forgedValue), { maxLength: 12 })

t.test('property: any cookies at all read as nothing, never an exception', async (t) => {
  const { cookies } = codec()
  fc.assert(
    fc.property(jar, fc.string({ maxLength: 40 }), (cookieJar, state) => {
      const req = request(cookieJar)
      for (const role of ROLES) if (cookies.read(req, role) !== undefined) return false
      return cookies.readTransaction(req, state) === undefined
    }),
    { numRuns: 3000 },
  )
  t.pass('3000 random cookie jars')
})

t.test('property: written values read back exactly, or as nothing once tampered with', async (t) => {
  const { cookies } = codec()
  const same = (a: unknown, b: unknown): boolean => JSON.stringify(a) === JSON.stringify(b)
  const written = fc.record({
    session: fc.record({ v: fc.jsonValue({ maxDepth: 3 }), pad: fc.string({ unit: 'grapheme', maxLength: 4000 }) }),
    credentials: fc.record({ v: fc.jsonValue({ maxDepth: 2 }), pad: fc.string({ maxLength: 12000 }) }),
    state: fc.string({ minLength: 1, maxLength: 43 }),
    tx: fc.record({ nonce: fc.string(), codeVerifier: fc.string(), redirectAfter: fc.option(fc.string(), { nil: undefined }) }),
  })
  fc.assert(
    fc.property(written, forgedJar, fc.boolean(), (w, forged, honestWins) => {
      const { reply: r, set } = reply()
      const expected: Record<CookieRole, unknown> = { session: undefined, credentials: undefined }
      for (const role of ROLES) {
        try {
          cookies.write(request({}), r, role, w[role], LATER)
          expected[role] = normalizeJson(w[role])
        } catch (err) {
          // Too large for MAX_CHUNKS: refused, and nothing is set for this role.
          if (!(err instanceof GatewayError) || err.code !== 'session_too_large') throw err
        }
      }
      cookies.writeTransaction(request({}), r, w.state, w.tx, 600)
      const tx = normalizeJson(w.tx)

      // The browser sends back what was set: exactly the data.
      const honest = apply({}, set)
      for (const role of ROLES) if (!same(cookies.read(request(honest), role), expected[role])) return false
      if (!same(cookies.readTransaction(request(honest), w.state), tx)) return false

      // Anything added or substituted (junk, forged markers, pieces of the real values under any
      // name): the data, or nothing.
      const real = Object.values(honest)
      const extra = Object.fromEntries(forged.map(([name, value]) => [name, resolvePiece(value, real)]))
      const req = request(honestWins ? { ...extra, ...honest } : { ...honest, ...extra })
      for (const role of ROLES) {
        const got = cookies.read(req, role)
        if (got !== undefined && !same(got, expected[role])) return false
      }
      const gotTx = cookies.readTransaction(req, w.state)
      return gotTx === undefined || same(gotTx, tx)
    }),
    { numRuns: 400 },
  )
  t.pass('400 written values with forgeries')
})
