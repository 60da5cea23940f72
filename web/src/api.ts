/** An error answer of the dashboard API: its HTTP status, message and (on 429) seconds to wait. */
export class ApiError extends Error {
  readonly status: number;
  readonly retryAfter: number | undefined;
  constructor(status: number, message: string, retryAfter?: number) {
    super(message);
    this.status = status;
    this.retryAfter = retryAfter;
  }
}

let csrfToken = '';
let onSignedOut: () => void = () => undefined;

/** Sets the CSRF token sent with every state-changing request (from sign-in or `/me`). */
export function setCsrfToken(token: string): void {
  csrfToken = token;
}

/** What to do when the session is gone (a 401 from any call): show the sign-in page. */
export function whenSignedOut(handler: () => void): void {
  onSignedOut = handler;
}

/**
 * Calls the dashboard API (`/dashboard/api` + `path`) with the session cookie and, unless GET, the CSRF token.
 * @returns the envelope's `data`. @throws ApiError with the server's message.
 */
export async function api<T>(
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE',
  path: string,
  body?: unknown,
): Promise<T> {
  const headers: Record<string, string> = {};
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (method !== 'GET') headers['x-csrf-token'] = csrfToken;
  const response = await fetch(`/dashboard/api${path}`, {
    method,
    headers,
    credentials: 'same-origin',
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const json = (await response.json().catch(() => undefined)) as
    | { data?: T; error?: { message?: string; retryAfter?: number } }
    | undefined;
  if (!response.ok) {
    const error = new ApiError(
      response.status,
      json?.error?.message ?? `request failed (HTTP ${response.status})`,
      json?.error?.retryAfter,
    );
    if (response.status === 401 && path !== '/sign-in') onSignedOut();
    throw error;
  }
  return json?.data as T;
}

/** The signed-in user, as `/me` and sign-in answer it. */
export interface Me {
  user: { id: string; email: string; role: 'owner' | 'member' | 'viewer' };
  org: { id: string; name: string; plan: string };
  csrfToken: string;
  expiresAt: string;
}

/** An instance as the API lists it. */
export interface InstanceSummary {
  id: string;
  name: string;
  env: 'test' | 'live';
  phone: string | null;
  connected: boolean;
  loggedIn: boolean;
  reason: string | null;
  lastConnectedAt: string | null;
  webhook: string | null;
  subscribe: string[];
  hasHmacKey: boolean;
  /**
   * In the list only: set when another node holds the instance's session and did not answer in time, so its state
   * is not known (`connected` and `loggedIn` are the answering node's view, false).
   */
  unreachable?: true;
}

/** The words for an instance's state. */
export function statusText(instance: InstanceSummary): string {
  if (instance.unreachable) return 'Unknown: its node does not answer';
  if (instance.loggedIn && instance.connected) return 'Logged in';
  if (instance.loggedIn) return 'Logged in, disconnected';
  if (instance.connected) return 'Waiting for QR scan';
  return 'Not connected';
}

/**
 * The badge class of an instance's state: `ok` logged in and connected, `warn` on the way, cut off or not known,
 * `off`.
 */
export function statusTone(instance: InstanceSummary): 'ok' | 'warn' | 'off' {
  if (instance.unreachable) return 'warn';
  if (instance.loggedIn && instance.connected) return 'ok';
  if (instance.loggedIn || instance.connected) return 'warn';
  return 'off';
}

/**
 * A duration for people, from seconds: `45 s`, `12 min`, `3 h 5 min`, `2 d 4 h` (the two largest units, rounded
 * down).
 */
export function duration(seconds: number): string {
  const s = Math.max(0, Math.floor(seconds));
  if (s < 60) return `${s} s`;
  const minutes = Math.floor(s / 60);
  if (minutes < 60) return `${minutes} min`;
  const hours = Math.floor(minutes / 60);
  if (hours < 24) return minutes % 60 === 0 ? `${hours} h` : `${hours} h ${minutes % 60} min`;
  const days = Math.floor(hours / 24);
  return hours % 24 === 0 ? `${days} d` : `${days} d ${hours % 24} h`;
}
