// Text placed in HTML by the gateway's pages and the demo upstream. Every character that can end
// a text node or an attribute value (quoted or not) is written as a numeric reference.

export function escapeHtml(value: string): string {
  return value.replace(/[&<>"'`]/g, (c) => `&#${c.charCodeAt(0)};`)
}
