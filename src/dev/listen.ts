import type { Server } from 'node:http'
import type { AddressInfo } from 'node:net'

/** Listens on host:port (0 = any free port) and resolves with the bound port, or rejects (EADDRINUSE). */
export function listen(server: Server, port: number, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, host, () => {
      server.off('error', reject)
      resolve((server.address() as AddressInfo).port)
    })
  })
}
