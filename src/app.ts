import Fastify, { type FastifyInstance } from 'fastify'
import type { GatewayConfig } from './config/types.js'

export interface BuildOptions {
  /** pino options or `false`; defaults to JSON logs at `config.log.level`. */
  logger?: boolean | object
}

/** Builds the gateway from a validated configuration. Does not listen. */
export async function buildApp(config: GatewayConfig, options: BuildOptions = {}): Promise<FastifyInstance> {
  void config
  return Fastify({ logger: options.logger ?? false })
}
