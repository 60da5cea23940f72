import type { FastifyRequest } from 'fastify';

/**
 * The selector of a non-send operation: query `from`, else header `x-instance-id`
 * (docs/decisions/0002-instance-resolution.md).
 */
export function selectorOf(request: FastifyRequest): string | undefined {
  const query = request.query as { from?: unknown } | undefined;
  if (typeof query?.from === 'string' && query.from !== '') return query.from;
  const header = request.headers['x-instance-id'];
  return typeof header === 'string' && header !== '' ? header : undefined;
}
