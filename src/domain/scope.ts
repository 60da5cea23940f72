/**
 * Scopes a key may carry (docs/api.md#conventions, docs/decisions/0003-scopes-and-keys.md). The `chat:` scopes cover
 * the operations on an instance; `chat:*` grants every one of them and nothing else. `instances:manage` creates,
 * renames and deletes the organization's instances over `/v1/instances`
 * (docs/decisions/0029-instances-over-the-api.md): it is granted only by name, never by `chat:*`.
 */
export type Scope =
  | 'chat:*'
  | 'chat:messages'
  | 'chat:contacts'
  | 'chat:session'
  | 'chat:groups'
  | 'chat:webhook'
  | 'instances:manage';

/** Every {@link Scope}, `chat:*` (all of the `chat:` scopes) first. */
export const SCOPES: readonly Scope[] = [
  'chat:*',
  'chat:messages',
  'chat:contacts',
  'chat:session',
  'chat:groups',
  'chat:webhook',
  'instances:manage',
];

/**
 * Whether a key carrying `held` may call an operation that needs `needed`: it holds `needed` itself, or `needed` is a
 * `chat:` scope and it holds `chat:*` (docs/decisions/0003-scopes-and-keys.md,
 * docs/decisions/0029-instances-over-the-api.md).
 */
export function grants(held: ReadonlySet<Scope>, needed: Scope): boolean {
  return held.has(needed) || (needed.startsWith('chat:') && held.has('chat:*'));
}
