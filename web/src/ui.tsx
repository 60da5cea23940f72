import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';
import { ApiError } from './api.ts';

/** A message line announced to screen readers: an error (role alert) or a status. */
export function Notice(props: { error?: string | null; ok?: string | null }) {
  if (props.error)
    return (
      <p class="notice error" role="alert">
        {props.error}
      </p>
    );
  if (props.ok)
    return (
      <p class="notice ok" role="status">
        {props.ok}
      </p>
    );
  return null;
}

/** The text of any thrown value, with the wait of a 429. */
export function messageOf(error: unknown): string {
  if (error instanceof ApiError && error.retryAfter !== undefined)
    return `${error.message} (retry in ${error.retryAfter} s)`;
  return error instanceof Error ? error.message : String(error);
}

/**
 * Runs an action with busy/error/success state for a form or button. `run(action, success)` clears the previous
 * message, awaits the action and shows `success` or the error.
 */
export function useAction() {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [ok, setOk] = useState<string | null>(null);
  const run = async <T,>(action: () => Promise<T>, success?: string | ((value: T) => string)) => {
    setBusy(true);
    setError(null);
    setOk(null);
    try {
      const value = await action();
      if (success !== undefined) setOk(typeof success === 'string' ? success : success(value));
      return value;
    } catch (caught) {
      setError(messageOf(caught));
      return undefined;
    } finally {
      setBusy(false);
    }
  };
  return { busy, error, ok, run };
}

/** A titled section of a page. */
export function Section(props: { title: string; children: ComponentChildren }) {
  const id = `section-${props.title.toLowerCase().replace(/[^a-z0-9]+/g, '-')}`;
  return (
    <section aria-labelledby={id} class="card">
      <h2 id={id}>{props.title}</h2>
      {props.children}
    </section>
  );
}
