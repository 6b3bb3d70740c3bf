import t from 'tap'
import { createRoutingAmbiguityCheck, patternCoversPrefix, samePatternAs } from '#src/access/ambiguity'
import { createPublicPathMatcher } from '#src/access/public-paths'
import { appliesTo, asPatternsRead, compilePathRegex, methodSet, regexProblem } from '#src/access/request-match'
import { createPathPolicies, createRuleMatcher } from '#src/access/rules'
import { loosenedKeys } from '#src/config/loosening'
import type { UpstreamConfig } from '#src/options/types'
import { resolve, withUpstream, type Tree } from '../fixtures/config/base.ts'

t.test('regexProblem: what a linear-time engine cannot run, or what would not read as it matches, is refused', async (t) => {
  const refused: Array<[string, RegExp]> = [
    ['/api', /must be anchored/],
    ['^/api', /must be anchored/],
    ['/api$', /must be anchored/],
    ['^/api\\$', /must be anchored/],
    ['^/a|/b$', /a \| outside parentheses/],
    ['^/(a)\\1$', /backreferences/],
    ['^/(?=a).*$', /lookahead and lookbehind/],
    ['^/(?<=a)b$', /not a valid RE2|lookahead/],
    ['^/a++$', /not a valid RE2/],
    ['^/[a$', /not a valid RE2/],
    ['^/\\pL$', /Unicode classes/],
    ['^/é$', /only printable ASCII/],
    ['^/a{101}$', /repetition counts above 100/],
    ['^/a{1,101}$', /repetition counts above 100/],
    [`^/${'a'.repeat(1000)}$`, /longer than 1000/],
  ]
  for (const [pattern, why] of refused) t.match(regexProblem(pattern), why, pattern)
  for (const pattern of ['^/api$', '^/(?:a|b)$', '^/[|]$', '^/a\\|b$', '^/[]|]$', '^/caf%C3%A9$', '^/a{100}$', '^(?i:/x)$', '^/a\\\\$']) {
    t.equal(regexProblem(pattern), undefined, pattern)
  }
  t.throws(() => compilePathRegex('/api'), TypeError, 'compiling refuses what the check refuses')
})

t.test('a path regex matches the whole path, in time linear in the path', async (t) => {
  const settings = compilePathRegex('^/projects/[^/]+/settings(?:/.*)?$')
  t.ok(settings('/projects/p/settings'))
  t.ok(settings('/projects/p/settings/x'))
  t.notOk(settings('/projects/p/settingsx'), 'the end is anchored')
  t.notOk(settings('/x/projects/p/settings'), 'the start is anchored')
  const purge = compilePathRegex('^/items/[0-9]+:purge$')
  t.ok(purge('/items/1:purge'))
  t.ok(purge('/items/1%3Apurge'), 'an encoded : is read as the : an application decodes it to')
  t.equal(asPatternsRead('/a%21%24%26%27%28%29%2A%2B%2C%3D%3A%40b'), "/a!$&'()*+,=:@b", 'sub-delims, : and @')
  t.equal(asPatternsRead('/a%2F%25%3F%23%5C%20%C3%A9'), '/a%2F%25%3F%23%5C%20%C3%A9', 'nothing else: not / % ? # \\ space or non-ASCII')
  // What backtracks exponentially in V8's RegExp (^(a+)+$ on 26 a and a b: 0.5 s, doubling with
  // each a) runs here in linear time; with these, a 32 KB path, as long as a request line gets.
  const budgetMs = 2000
  for (const [pattern, path] of [
    ['^/(a+)+$', `/${'a'.repeat(32000)}b`],
    ['^/(a|aa)+$', `/${'a'.repeat(32000)}b`],
    ['^/(?:.*a){100}$', `/${'a'.repeat(32000)}`],
    ['^/(?:x+x+)+y$', `/${'x'.repeat(32000)}`],
  ] as const) {
    const test = compilePathRegex(pattern)
    const started = performance.now()
    test(path)
    t.ok(performance.now() - started < budgetMs, `${pattern} on 32 KB within ${budgetMs} ms`)
  }
})

t.test('methods: uppercase in the configuration, compared without case, GET with HEAD', async (t) => {
  const get = methodSet(['GET'])
  t.ok(appliesTo(get, 'GET'))
  t.ok(appliesTo(get, 'HEAD'), 'GET covers HEAD (RFC 9110 9.3.2)')
  t.ok(appliesTo(get, 'get'), 'a lowercase method is the same method to many frameworks')
  t.notOk(appliesTo(get, 'POST'))
  t.notOk(appliesTo(get, undefined), 'without a method, only entries for every method apply')
  t.ok(appliesTo(undefined, undefined))
  t.notOk(appliesTo(methodSet(['HEAD']), 'GET'), 'HEAD does not cover GET')
})

t.test('publicPaths: globs and regexes, each for its methods; order plays no part', async (t) => {
  const isPublic = createPublicPathMatcher(['/public/**', { regex: '^/api/v[0-9]+/health$', methods: ['GET'] }, { glob: '/docs/**', methods: ['GET', 'POST'] }])
  t.ok(isPublic('/public/x', 'DELETE'))
  t.ok(isPublic('/api/v2/health', 'GET'))
  t.ok(isPublic('/api/v2/health', 'HEAD'))
  t.notOk(isPublic('/api/v2/health', 'POST'))
  t.notOk(isPublic('/api/v2/health', undefined), 'a lookup without a method: only the entries for every method')
  t.notOk(isPublic('/api/v2/health/x', 'GET'))
  t.ok(isPublic('/docs/a', 'POST'))
  t.notOk(isPublic('/api/v2/health?x', 'GET'), 'a query is never matched')
  t.throws(() => createPublicPathMatcher([{ regex: '^/(a)\\1$' }]), /publicPaths: regex/)
})

t.test('rules: regex rules first, in the order written; then the longest prefix, a rule for the method before one for every method', async (t) => {
  const ruleFor = createRuleMatcher([
    { path: '/api' }, // 0
    { path: '/api/items', methods: ['DELETE'] }, // 1
    { regex: '^/api/items/[0-9]+/export$' }, // 2
    { regex: '^/api/items/.*$', methods: ['PUT'] }, // 3
    { path: '/api', methods: ['POST'] }, // 4
    { path: '/api/items' }, // 5
  ])
  t.equal(ruleFor('/api/x', 'GET'), 0, 'the prefix')
  t.equal(ruleFor('/api/x', 'POST'), 4, 'at the same prefix, the rule for the method')
  t.equal(ruleFor('/api/items/1', 'DELETE'), 1, 'the longest prefix for the method')
  t.equal(ruleFor('/api/items/1', 'GET'), 5, 'a rule for another method is not there')
  t.equal(ruleFor('/api/items/1/export', 'DELETE'), 2, 'a regex rule before any prefix rule')
  t.equal(ruleFor('/api/items/1/export', 'PUT'), 2, 'the first regex rule in the order written')
  t.equal(ruleFor('/api/items/1', 'PUT'), 3)
  t.equal(ruleFor('/api/items/1', 'put'), 3, 'methods are compared without case')
  t.equal(ruleFor('/other', 'GET'), -1)

  const upstream = resolve(
    withUpstream({
      allow: { groups: ['staff'] },
      rules: [
        { regex: '^/projects/[^/]+/settings$', allow: { groups: ['admins'] } },
        { path: '/projects', methods: ['GET'], allow: {} },
      ],
    }),
  ).upstreams[0] as UpstreamConfig
  const policyFor = createPathPolicies(upstream)
  t.match(policyFor('/projects/a/settings', 'GET'), { rule: 0, regex: '^/projects/[^/]+/settings$', needsSignIn: true })
  t.match(policyFor('/projects/a', 'GET'), { rule: 1, path: '/projects', needsSignIn: false })
  t.match(policyFor('/projects/a', 'POST'), { rule: -1, needsSignIn: true }, "another method: the upstream's allow")
})

t.test('ambiguity: regexes are read without case, for the request method', async (t) => {
  const upstream = (patch: Tree): UpstreamConfig => resolve(withUpstream(patch)).upstreams[0] as UpstreamConfig
  const rules = createRoutingAmbiguityCheck([upstream({ rules: [{ regex: '^/projects/[^/]+/settings$', methods: ['POST'], allow: { groups: ['admins'] } }] })])
  t.ok(rules('app.example.com', '/PROJECTS/a/settings', 'POST'), 'a folded spelling that reaches another rule')
  t.notOk(rules('app.example.com', '/PROJECTS/a/settings', 'GET'), 'not for a method the rule is not for')
  t.notOk(rules('app.example.com', '/projects/a/settings', 'POST'), 'the exact spelling')
  t.notOk(rules('app.example.com', '/projects/A/settings', 'POST'), 'inside the pattern, a letter in any case matches both ways')
  const capital = createRoutingAmbiguityCheck([upstream({ rules: [{ regex: '^/Projects/[^/]+/settings$', allow: { groups: ['admins'] } }] })])
  t.notOk(capital('app.example.com', '/Projects/a/settings', 'GET'), 'a pattern with capitals: its own spelling is not ambiguous')
  t.ok(capital('app.example.com', '/projects/a/settings', 'GET'), 'another case of it is')
  const publicRegex = createRoutingAmbiguityCheck([upstream({ publicPaths: [{ regex: '^/Docs/.*$' }] })])
  t.ok(publicRegex('h', '/docs/x', 'GET'), 'a lowercase spelling a case-insensitive upstream reads as the public /Docs')
  t.ok(publicRegex('h', '/DOCS/x', 'GET'))
  t.notOk(publicRegex('h', '/Docs/x', 'GET'))
})

t.test('load-time verdicts: covering and same patterns', async (t) => {
  t.ok(patternCoversPrefix('^/.*$', '/'))
  t.ok(patternCoversPrefix('^.*$', '/app'))
  t.ok(patternCoversPrefix('^/app(?:/.*)?$', '/app'))
  t.notOk(patternCoversPrefix('^/app/.*$', '/app'), 'not the prefix itself')
  t.notOk(patternCoversPrefix('^/[a-z/]*$', '/'), 'not every character of a path')
  t.notOk(patternCoversPrefix('^/(a$', '/'), 'a pattern that does not compile covers nothing')
  t.equal(samePatternAs([{ path: '/a' }, { path: '/A' }], 1), 0, 'prefixes folded')
  t.equal(samePatternAs([{ glob: '/a/**' }, { glob: '/A/**' }], 1), -1, 'globs as written')
  t.equal(
    samePatternAs(
      [
        { regex: '^/a$', methods: ['GET'] },
        { regex: '^/a$', methods: ['HEAD'] },
      ],
      1,
    ),
    0,
    'GET covers HEAD',
  )
  t.equal(samePatternAs([{ path: '/a' }, { path: '/a', methods: ['GET'] }], 1, true), -1, 'rules: one for a method beside one for every method')
  t.equal(samePatternAs([{ path: '/a' }, { path: '/a', methods: ['GET'] }], 1), 0, 'public paths: the one for every method already covers it')
})

t.test('a reload that removes a regex or method rule, or adds a public entry, is a loosening; the same entries are not', async (t) => {
  const config = (patch: Tree) => resolve(withUpstream(patch))
  const before = config({
    publicPaths: ['/public/**', { regex: '^/api/health$', methods: ['GET'] }],
    rules: [
      { regex: '^/projects/[^/]+/settings$', allow: { groups: ['admins'] } },
      { path: '/api', methods: ['DELETE'], allow: { groups: ['admins'] } },
    ],
  })
  t.same(loosenedKeys(before, before), [], 'the same configuration')
  t.same(
    loosenedKeys(
      before,
      config({
        publicPaths: [{ glob: '/public/**' }, { regex: '^/api/health$', methods: ['GET'] }],
        rules: [
          { path: '/api', methods: ['DELETE'], allow: { groups: ['admins'] } },
          { regex: '^/projects/[^/]+/settings$', allow: { groups: ['admins'] } },
        ],
      }),
    ),
    [],
    'a glob written as an object, and rules in another order',
  )
  t.same(
    loosenedKeys(
      before,
      config({
        publicPaths: ['/public/**', { regex: '^/api/health$' }],
        rules: [
          { regex: '^/projects/[^/]+/settings$', allow: {} },
          { path: '/api', allow: { groups: ['admins'] } },
        ],
      }),
    ),
    ['upstreams[0].rules[0].allow.groups (app)', 'upstreams[0].rules[1] (/api): removed (app)', 'upstreams[0].publicPaths (app)'],
    'a public entry for more methods, a rule for every method instead of DELETE, a regex rule that admits all',
  )
})
