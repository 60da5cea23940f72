/**
 * The two environments a key, an instance and a rate-limit counter belong to (docs/api.md#conventions,
 * docs/decisions/0003-scopes-and-keys.md).
 */
export type Environment = 'live' | 'test';
