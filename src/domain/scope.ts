/** Scopes a key may carry (docs/api.md#conventions, docs/decisions/0003-scopes-and-keys.md). */
export type Scope =
  | 'chat:*'
  | 'chat:messages'
  | 'chat:contacts'
  | 'chat:session'
  | 'chat:groups'
  | 'chat:webhook';

/** Every {@link Scope}, `chat:*` (all of them) first. */
export const SCOPES: readonly Scope[] = [
  'chat:*',
  'chat:messages',
  'chat:contacts',
  'chat:session',
  'chat:groups',
  'chat:webhook',
];
