import t from 'tap'
import { escapeHtml } from '#src/lib/html'

t.test('escapeHtml', async (t) => {
  t.equal(escapeHtml('a<b>&"\'`'), 'a&#60;b&#62;&#38;&#34;&#39;&#96;')
  t.equal(escapeHtml('plain'), 'plain')
})
