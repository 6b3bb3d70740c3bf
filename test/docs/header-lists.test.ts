import t from 'tap'
import YAML from 'yaml'
import { fencedBlocks, proseLines, recipe, userPages, type Page } from '../fixtures/markdown.ts'
import { FORWARD_AUTH_LISTED_HEADERS, IDENTITY_ANSWER_HEADERS, lower } from '../fixtures/k8s-checks.ts'
import { AUTH_REQUEST_ACCESS_TOKEN, REQUEST_OVERRIDE_HEADER_NAMES } from '#src/upstream/header-policy'

// The forward-auth identity headers the documentation names come from the code
// (src/upstream/header-policy.ts AUTH_REQUEST_HEADERS): every X-Auth-Request-* name a page writes is
// one the gateway sends; a passage listing four or more lists them all (step-up's three are its own); a count of them is the code's;
// and the nginx and Caddy recipes and the ingress-nginx and Traefik snippets copy exactly the
// identity headers and the request-target and method overrides (the overlays' lists are compared
// in test/docker and test/chart with the same k8s-checks.ts lists).

const SENT = [...IDENTITY_ANSWER_HEADERS, AUTH_REQUEST_ACCESS_TOKEN]
/** Headers of other software a page may name: ingress-nginx's auth-request-redirect. */
const OTHERS = ['x-auth-request-redirect']
const NUMBERS = ['zero', 'one', 'two', 'three', 'four', 'five', 'six', 'seven', 'eight', 'nine', 'ten', 'eleven', 'twelve']

const sorted = (names: Iterable<string>): string[] => [...new Set(lower([...names]))].sort()

/**
 * The X-Auth-Request-* names of a passage, abbreviations expanded: "`X-Auth-Request-User`,
 * `-Email`" names X-Auth-Request-Email too. The wildcard `X-Auth-Request-*` is no name.
 */
function namedIn(passage: string): string[] {
  const names: string[] = []
  let full = false
  for (const m of passage.matchAll(/`?(X-Auth-Request-[A-Za-z-]+(?<!-))`?|`(-[A-Z][A-Za-z-]*)`/gi)) {
    if (m[1] !== undefined) {
      names.push(m[1].toLowerCase())
      full = true
    } else if (full && m[2] !== undefined) {
      names.push(`x-auth-request${m[2].toLowerCase()}`)
    }
  }
  return names
}

/** A page's prose in passages: paragraphs, list items and table rows. */
function passages(page: Page): { text: string; line: number }[] {
  const out: { text: string; line: number }[] = []
  let current: { text: string; line: number } | undefined
  for (const { line, number } of proseLines(page.text)) {
    const starts = line.trim() === '' || /^\s*(\||[-*] |\d+\. |#)/.test(line)
    if (starts && current !== undefined) {
      out.push(current)
      current = undefined
    }
    if (line.trim() === '') continue
    if (current === undefined) current = { text: line, line: number }
    else current.text += `\n${line}`
  }
  if (current !== undefined) out.push(current)
  return out
}

const pages = userPages()

t.test('every X-Auth-Request-* name a page writes is one the gateway sends', async (t) => {
  for (const page of pages) {
    for (const { text, line } of passages(page)) {
      for (const name of namedIn(text)) {
        t.ok(SENT.includes(name) || OTHERS.includes(name), `${page.file}:${line}: ${name} is no header of the forward-auth answer`)
      }
    }
    for (const block of fencedBlocks(page)) {
      for (const name of namedIn(block.body)) t.ok(SENT.includes(name) || OTHERS.includes(name), `${block.file}:${block.line}: ${name}`)
    }
  }
})

t.test('a passage listing identity headers lists every one', async (t) => {
  let lists = 0
  for (const page of pages) {
    for (const { text, line } of passages(page)) {
      const named = namedIn(text).filter((n) => IDENTITY_ANSWER_HEADERS.includes(n))
      if (new Set(named).size < 4) continue
      lists++
      t.same(sorted(named), sorted(IDENTITY_ANSWER_HEADERS), `${page.file}:${line} lists the identity headers`)
    }
  }
  t.ok(lists >= 2, `the forward-auth and Kubernetes pages list them (${lists} lists)`)
})

t.test('a count of the identity headers is the code\'s', async (t) => {
  const count = IDENTITY_ANSWER_HEADERS.length
  for (const page of pages) {
    for (const { text, line } of passages(page)) {
      for (const m of text.matchAll(/\b(?:lists|carries|copies|all|the)\s+(\w+)\s+identity\s+headers\b/gi)) {
        const word = (m[1] ?? '').toLowerCase()
        const n = NUMBERS.indexOf(word) >= 0 ? NUMBERS.indexOf(word) : /^\d+$/.test(word) ? Number(word) : undefined
        if (n !== undefined) t.equal(n, count, `${page.file}:${line}: "${m[0].replace(/\s+/g, ' ')}"`)
      }
    }
  }
})

const all = (text: string, re: RegExp): string[][] => [...text.matchAll(re)].map((m) => m.slice(1).map((g) => g ?? ''))

t.test('the nginx recipe copies every identity header and empties every override', async (t) => {
  const conf = recipe('docs/deploy/nginx.md', 'nginx')
  const sources = new Map(all(conf, /auth_request_set \$(\w+) \$upstream_http_(\w+);/g).map(([variable, source]) => [variable, source]))
  const copied = all(conf, /proxy_set_header ([\w-]+) \$(auth_\w+);/g)
  t.same(sorted(copied.map(([name]) => name ?? '')), sorted(IDENTITY_ANSWER_HEADERS))
  for (const [name = '', variable = ''] of copied) {
    t.equal(sources.get(variable), name.toLowerCase().replaceAll('-', '_'), `${name} is set from the answer's own header`)
  }
  // The check's own Content-Length is emptied too (its subrequest has no body).
  const emptied = all(conf, /proxy_set_header ([\w-]+) "";/g).map(([name]) => name ?? '').filter((n) => n !== 'Content-Length')
  t.same(sorted(emptied), sorted(REQUEST_OVERRIDE_HEADER_NAMES))
})

t.test('the Caddy recipe copies every identity header, removes placeholders and every override', async (t) => {
  const conf = recipe('docs/deploy/caddy.md', 'caddyfile')
  const copy = /copy_headers ([^\n]+)/.exec(conf)?.[1]?.trim().split(/\s+/) ?? []
  t.same(sorted(copy), sorted(FORWARD_AUTH_LISTED_HEADERS))
  t.same(sorted(all(conf, /header_regexp ([\w-]+) \^\\\{http\\\.reverse_proxy\\\./g).map(([n]) => n ?? '')), sorted(IDENTITY_ANSWER_HEADERS))
  t.same(sorted(all(conf, /request_header @placeholder_\w+ -([\w-]+)/g).map(([n]) => n ?? '')), sorted(IDENTITY_ANSWER_HEADERS))
  t.same(sorted(all(conf, /^\s*request_header -([\w-]+)$/gm).map(([n]) => n ?? '')), sorted(REQUEST_OVERRIDE_HEADER_NAMES))
})

t.test('the ingress-nginx and Traefik snippets list the identity headers and the overrides', async (t) => {
  let snippets = 0
  for (const page of pages) {
    for (const b of fencedBlocks(page).filter((x) => x.lang === 'yaml')) {
      for (const doc of YAML.parseAllDocuments(b.body)) {
        const o = doc.toJS() as { metadata?: { annotations?: Record<string, string> }; spec?: { forwardAuth?: { authResponseHeaders?: string[] } } } | null
        const nginx = o?.metadata?.annotations?.['nginx.ingress.kubernetes.io/auth-response-headers']
        const traefik = o?.spec?.forwardAuth?.authResponseHeaders
        for (const list of [nginx?.split(','), traefik]) {
          if (list === undefined) continue
          snippets++
          // An upstream with forwardAccessToken or tokenExchange adds its token headers.
          const extra = ['authorization', AUTH_REQUEST_ACCESS_TOKEN]
          t.same(sorted(list.map((n) => n.trim())).filter((n) => !extra.includes(n)), sorted(FORWARD_AUTH_LISTED_HEADERS), `${b.file}:${b.line}`)
        }
      }
    }
  }
  t.ok(snippets >= 2, `${snippets} snippets`)
})
