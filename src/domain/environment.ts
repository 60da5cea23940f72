/** The two environments a key, an instance and a rate-limit counter belong to (SPEC Authentication, DESIGN D1). */
export type Environment = 'live' | 'test';
