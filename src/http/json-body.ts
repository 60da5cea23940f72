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
 * The message refusing U+0000 in `field` (docs/decisions/0075-no-nul-characters.md): PostgreSQL's text cannot hold
 * it, so a store would fail on it (a 500), and no field of the API has a use for it; refused on every store alike.
 */
export function nulMessage(field: string): string {
  return `${field} must not contain the NUL character (U+0000)`;
}

/**
 * The first string or key of a parsed JSON body holding U+0000, as {@link nulMessage} names it (`name`, `id[1]`,
 * `a key of options`), or undefined. Only run on a body whose text holds the escape `\u0000` (JSON cannot carry the
 * character otherwise, RFC 8259 §7), so other bodies are not walked for it.
 */
export function nulProblem(value: unknown): string | undefined {
  const stack: [unknown, string][] = [[value, '']];
  for (let next = stack.pop(); next !== undefined; next = stack.pop()) {
    const [node, path] = next;
    if (typeof node === 'string') {
      if (node.includes('\u0000')) return nulMessage(path || 'request body');
      continue;
    }
    if (node === null || typeof node !== 'object') continue;
    const inArray = Array.isArray(node);
    for (const [key, child] of Object.entries(node)) {
      if (key.includes('\u0000')) return nulMessage(`a key of ${path || 'request body'}`);
      stack.push([child, childPath(path, key, inArray)]);
    }
  }
  return undefined;
}

/**
 * The first of `values` (a request's path parameters or query string, as parsed) holding U+0000, named in the style
 * of validation messages (`id`, `ids[1]`), or undefined (docs/decisions/0075-no-nul-characters.md).
 */
export function textPartProblem(values: unknown): string | undefined {
  if (values === null || typeof values !== 'object') return undefined;
  for (const [key, value] of Object.entries(values)) {
    const items = Array.isArray(value) ? value : [value];
    for (const [i, item] of items.entries()) {
      if (typeof item === 'string' && item.includes('\u0000'))
        return nulMessage(Array.isArray(value) ? `${key}[${i}]` : key);
    }
  }
  return undefined;
}

/**
 * The app's `application/json` body parser (Fastify `addContentTypeParser`, `parseAs: 'string'`): an empty
 * body is no body; otherwise `JSON.parse`, then {@link jsonBodyProblem} and, when the text holds `\u0000`,
 * {@link nulProblem}.
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
  const problem = jsonBodyProblem(value) ?? (text.includes('\\u0000') ? nulProblem(value) : undefined);
  if (problem === undefined) done(null, value);
  else done(new DomainError('invalid', problem), undefined);
}
