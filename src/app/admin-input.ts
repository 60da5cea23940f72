import type { Environment } from '../domain/environment.ts';
import { DomainError } from '../domain/errors.ts';

/**
 * How an operator-input error names the field it is about: `cli` as the command's option (`--expires-in`,
 * docs/cli.md), `api` as the JSON field of the dashboard's API (`expiresIn`, docs/dashboard.md). The rule text is
 * the same either way.
 */
export type FieldStyle = 'cli' | 'api';

/**
 * The name of field `option` (kebab-case, as the CLI spells it without `--`) in `style`: `--expires-in` or
 * `expiresIn`.
 */
export function fieldName(style: FieldStyle, option: string): string {
  return style === 'cli' ? `--${option}` : option.replace(/-([a-z])/g, (_m, c: string) => c.toUpperCase());
}

/** A DomainError `invalid` whose message starts with field `option` named in `style`. */
export function invalidField(style: FieldStyle, option: string, rule: string): DomainError {
  return new DomainError('invalid', `${fieldName(style, option)}${rule}`);
}

/** Checks an environment name. @throws DomainError invalid `--env must be test or live` (or `env …`). */
export function parseEnv(env: string, style: FieldStyle = 'cli'): Environment {
  if (env !== 'test' && env !== 'live') throw invalidField(style, 'env', ' must be test or live');
  return env;
}
