// The cross-key rules of cookies (config/cross-key/cookies.ts): SameSite=None only with Secure, and
// Secure cookies only where a browser keeps them.

import t from 'tap'
import { problems } from '../../fixtures/config/base.ts'

t.test('sameSite none needs secure; secure needs an https or loopback public URL', async (t) => {
  t.strictSame(problems({ cookies: { sameSite: 'none', secure: false } }), ['cookies.sameSite: none requires cookies.secure: true'], 'sameSite none without secure')
  t.strictSame(problems({ cookies: { sameSite: 'none' } }), [], 'sameSite none with secure')
  t.strictSame(problems({ server: { publicUrl: 'http://app.example.com' } }), ['cookies.secure: must be false when server.publicUrl is plain http (browsers drop Secure cookies there)'], 'secure cookies on a plain-http public URL')
  t.strictSame(problems({ server: { publicUrl: 'http://localhost:8080' } }), [], 'secure cookies on http://localhost')
  t.strictSame(problems({ server: { publicUrl: 'http://127.0.0.1:8080' } }), [], 'secure cookies on http://127.0.0.1')
  t.strictSame(problems({ server: { publicUrl: 'http://127.1:8080' } }), [], 'secure cookies on http://127.1 (a loopback address however spelled)')
  t.strictSame(problems({ server: { publicUrl: 'http://127.example.com' } }), ['cookies.secure: must be false when server.publicUrl is plain http (browsers drop Secure cookies there)'], 'secure cookies on a host named like a loopback address')
  t.strictSame(problems({ server: { publicUrl: 'http://app.example.com' }, cookies: { secure: false } }), [], 'insecure cookies on plain http')
})
