/** Scopes a key may carry (SPEC Authentication 4, DESIGN D5). */
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
