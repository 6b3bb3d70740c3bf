import fc from 'fast-check'
import t from 'tap'
import { createRoutingAmbiguityCheck, foldPath } from '#src/access/ambiguity'
import { createUpstreamMatcher } from '#src/access/match'
import { normalizePath } from '#src/access/path'
import { resolve, type Tree } from '../fixtures/config/base.ts'

function checkFor(list: Tree[]) {
  const upstreams = resolve({ upstreams: list.map((u) => ({ target: 'http://127.0.0.1:3000', ...u })) }).upstreams
  return { isAmbiguous: createRoutingAmbiguityCheck(upstreams), match: createUpstreamMatcher(upstreams) }
}

t.test('foldPath: lowercase, trailing dots and encoded spaces dropped from every segment', async (t) => {
  const cases: Array<[string, string]> = [
    ['/', '/'],
    ['/admin', '/admin'],
    ['/ADMIN/X', '/admin/x'],
    ['/admin./x', '/admin/x'],
    ['/admin%20/x', '/admin/x'],
    ['/admin.%20.%20/x.', '/admin/x'],
    ['/admin/', '/admin/'],
    ['/admin./', '/admin/'],
    ['/.../admin', '/admin'],
    ['/a.b/c', '/a.b/c'],
    ['/caf%C3%A9', '/caf%c3%a9'],
  ]
  for (const [path, expected] of cases) t.equal(foldPath(path), expected, path)
})

t.test('a variant that reaches another upstream, or another public decision, is ambiguous', async (t) => {
  const { isAmbiguous } = checkFor([
    { name: 'root', publicPaths: ['/public/**', '/Content/**', '/files/*.txt'] },
    { name: 'admin', match: { pathPrefix: '/admin' } },
    { name: 'docs', match: { pathPrefix: '/Docs' } },
    { name: 'secure', match: { pathPrefix: '/', hosts: ['secure.example.com'] } },
  ])
  const ambiguous = [
    '/ADMIN',
    '/ADMIN/x',
    '/Admin/x',
    '/admin./x',
    '/admin%20/x',
    '/admin.',
    '/admin%20',
    '/docs',
    '/docs/x',
    '/DOCS/x',
    '/PUBLIC/x',
    '/public./x',
    '/content/x',
    '/FILES/a.txt',
    '/files/a.TXT',
    '/API/v1/openid/redirect',
  ]
  for (const path of ambiguous) t.ok(isAmbiguous('h', path), path)
  const fine = [
    '/',
    '/x',
    '/X',
    '/admin',
    '/admin/X',
    '/admin/x.',
    '/administrator',
    '/Administrator',
    '/Docs',
    '/Docs/X',
    '/public/x',
    '/public/X',
    '/Content/x',
    '/files/a.txt',
    '/a.',
    '/api/v1/openid/x',
  ]
  for (const path of fine) t.notOk(isAmbiguous('h', path), path)
  t.ok(isAmbiguous('secure.example.com', '/ADMIN/x'), 'the unconstrained /admin serves every host')
  t.notOk(isAmbiguous('secure.example.com', '/X'))
})

t.test('stable configuration and path: no variant is computed', async (t) => {
  const { isAmbiguous } = checkFor([{ name: 'root' }, { name: 'admin', match: { pathPrefix: '/admin' } }])
  t.notOk(isAmbiguous('h', '/admin/x'))
  t.notOk(isAmbiguous('h', '/x'))
  t.ok(isAmbiguous('h', '/Admin/x'))
})

t.test('property: a path refused as ambiguous has a variant that routes elsewhere; one passed routes like all its variants', async (t) => {
  const { isAmbiguous, match } = checkFor([
    { name: 'root', publicPaths: ['/pub/**'] },
    { name: 'admin', match: { pathPrefix: '/admin' } },
    { name: 'api', match: { pathPrefix: '/admin/api' } },
  ])
  const segment = fc.constantFrom('admin', 'ADMIN', 'Admin', 'admin.', 'admin%20', 'api', 'API', 'api.', 'pub', 'PUB', 'x', 'X')
  const path = fc.array(segment, { minLength: 1, maxLength: 4 }).map((s) => normalizePath('/' + s.join('/'))?.path ?? '/')
  fc.assert(
    fc.property(path, (p) => {
      const folded = foldPath(p)
      if (isAmbiguous('h', p)) return true
      // Not ambiguous: the lowercase variant reaches the same upstream.
      return match('h', folded)?.name === match('h', p)?.name
    }),
    { numRuns: 500, seed: 6 },
  )
  t.pass('500 paths')
})
