import type { FastifyRequest } from 'fastify';
import { DomainError } from '../domain/errors.ts';

/** Deepest JSON nesting accepted in a request body (docs/decisions/0020-security-promises.md). */
export const MAX_JSON_DEPTH = 32;

/**
 * `a.b[0].c` path of a key under `parent` (the style of validation messages,
 * docs/decisions/0001-envelope-and-error-codes.md).
 */
function childPath(parent: string, key: string, inArray: boolean): string {
  if (inArray) return `${parent}[${key}]`;
  return parent === '' ? key : `${parent}.${key}`;
}

/**
 * What is wrong with a parsed JSON body, if anything: nesting deeper than `MAX_JSON_DEPTH`, or a key that
 * would poison an object prototype once merged (`__proto__`, or `constructor` holding `prototype`: the keys
 * Fastify's own JSON parser refuses). `JSON.parse` keeps such keys as plain data, so they are found by walking
 * the value. The message names the key and where it is.
 */
export function jsonBodyProblem(value: unknown): string | undefined {
  const stack: [unknown, number, string][] = [[value, 1, '']];
  while (stack.length > 0) {
    const next = stack.pop();
    if (!next) break;
    const [node, depth, path] = next;
    if (node === null || typeof node !== 'object') continue;
    if (depth > MAX_JSON_DEPTH) return `request body is nested deeper than ${MAX_JSON_DEPTH} levels`;
    const inArray = Array.isArray(node);
    for (const [key, child] of Object.entries(node)) {
      const at = childPath(path, key, inArray);
      if (!inArray && key === '__proto__') {
        return `request body must not contain the key __proto__ (found at ${at})`;
      }
      if (!inArray && key === 'constructor' && child !== null && typeof child === 'object') {
        if (Object.hasOwn(child, 'prototype')) {
          return `request body must not contain the key constructor.prototype (found at ${at}.prototype)`;
        }
      }
      stack.push([child, depth + 1, at]);
    }
  }
  return undefined;
}

/**
 * The app's `application/json` body parser (Fastify `addContentTypeParser`, `parseAs: 'string'`): an empty
 * body is no body; otherwise `JSON.parse`, then {@link jsonBodyProblem}.
 * @throws (through `done`) DomainError invalid `request body is not valid JSON`, or the problem found.
 */
export function parseJsonBody(
  _request: FastifyRequest,
  body: string | Buffer,
  done: (error: Error | null, value?: unknown) => void,
): void {
  const text = typeof body === 'string' ? body : body.toString('utf8');
  if (text.trim() === '') {
    done(null, undefined);
    return;
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    done(new DomainError('invalid', 'request body is not valid JSON'), undefined);
    return;
  }
  const problem = jsonBodyProblem(value);
  if (problem === undefined) done(null, value);
  else done(new DomainError('invalid', problem), undefined);
}
