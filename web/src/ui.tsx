import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError } from './api.ts';

/**
 * The tone of a state's badge, the same on every page (docs/decisions/0047-dashboard-style-library.md): `ok` done or
 * up (logged in and connected, delivered, enabled), `warn` on the way or cut off (waiting for the QR scan,
 * disconnected, retrying), `bad` failed, `off` not started or stopped (not connected, logged out, disabled, revoked),
 * `info` waiting its turn (queued, sending).
 */
export type Tone = 'ok' | 'warn' | 'bad' | 'off' | 'info';

/** A state as a word and a colour, never colour alone: `<Badge tone="ok">Delivered</Badge>`. */
export function Badge(props: { tone: Tone; children: ComponentChildren }) {
  return <span class={`badge tone-${props.tone}`}>{props.children}</span>;
}

/** Date and time in the browser's language and time zone, the zone written out: `Nov 26, 2026, 2:52:10 PM GMT-3`. */
const LOCAL = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'long' });
/** The same instant in UTC, for the tooltip: `2026-11-26 17:52:10 UTC`. */
const UTC_TITLE = (date: Date) => `${date.toISOString().slice(0, 19).replace('T', ' ')} UTC`;

/**
 * A date-time for people from an ISO 8601 string or epoch milliseconds (docs/decisions/0027-times-as-epoch-ms.md):
 * in the browser's locale and time zone through Intl.DateTimeFormat, the zone named; a dash for null, undefined or
 * an unreadable value.
 */
export function when(value: string | number | null | undefined): string {
  if (value === null || value === undefined || value === '') return '—';
  const date = new Date(value);
  return Number.isNaN(date.getTime()) ? '—' : LOCAL.format(date);
}

/**
 * A `<time>` element for a date-time: the text as {@link when} writes it, `datetime` the ISO instant, and a title
 * giving it in UTC (`2026-11-26 17:52:10 UTC`), so a reader in another zone can compare with logs. A dash for no
 * value.
 */
export function Time(props: { value: string | number | null | undefined }) {
  const text = when(props.value);
  if (text === '—' || props.value === null || props.value === undefined) return <>—</>;
  const date = new Date(props.value);
  return (
    <time dateTime={date.toISOString()} title={UTC_TITLE(date)}>
      {text}
    </time>
  );
}

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

/** How long a success notice stays, milliseconds. */
const OK_NOTICE_MS = 8_000;

/**
 * Runs an action with busy/error/success state for a form or button. `run(action, success)` clears the previous
 * message, awaits the action and shows `success` (for {@link OK_NOTICE_MS}) or the error (until the next run).
 */
export function useAction() {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [ok, setOk] = useState<string | null>(null);
  const clearOk = useRef<ReturnType<typeof setTimeout> | undefined>(undefined);
  useEffect(() => () => clearTimeout(clearOk.current), []);
  const run = async <T,>(action: () => Promise<T>, success?: string | ((value: T) => string)) => {
    setBusy(true);
    setError(null);
    setOk(null);
    clearTimeout(clearOk.current);
    try {
      const value = await action();
      if (success !== undefined) {
        setOk(typeof success === 'string' ? success : success(value));
        // A success notice says what just happened: it leaves once it is stale. Errors stay until the next action.
        clearOk.current = setTimeout(() => setOk(null), OK_NOTICE_MS);
      }
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

/**
 * Orders overlapping reads of one thing (a list read again on a pushed event while the reader changes its filter or
 * page, or picks another instance): `begin()` starts a read and returns `latest()`, true while no read of the same
 * hook began after it. A read applies its answer, or shows its error, only while `latest()` holds, so an older read
 * that answers last never replaces what a newer one showed (docs/dashboard.md "Live updates"). An action whose answer
 * is shown (a connect's status, a block's list) begins as a read does. A value the server pushes in full (the live
 * stream's `status`) calls `begin()` and shows itself at once: it is newer than every read started before it.
 */
export function useLatestRead(): () => () => boolean {
  const last = useRef(0);
  return () => {
    const read = ++last.current;
    return () => read === last.current;
  };
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

/**
 * A button that asks first: it opens a modal dialog (the platform's `<dialog>` in Pico's modal style: focus moves
 * into it and stays inside, Escape cancels and focus returns to the button) saying what will happen, and runs
 * `onConfirm` only when the user presses the confirming button. For every action that cannot be undone from the
 * dashboard (revoke a key, log out a number, remove a user, delete an instance or a webhook endpoint).
 */
export function ConfirmButton(props: {
  /** The button's text. */
  label: string;
  /** The button's accessible name when its text is not enough (`Revoke key svc_test_ab12`). */
  ariaLabel?: string;
  /** The dialog's heading, a question (`Revoke key svc_test_ab12…?`). */
  title: string;
  /** What will happen, in a sentence or two. */
  children: ComponentChildren;
  /** The confirming button's text (`Revoke key`). */
  confirmLabel: string;
  onConfirm: () => unknown;
  disabled?: boolean;
}) {
  const dialog = useRef<HTMLDialogElement>(null);
  const id = `confirm-${props.title.toLowerCase().replace(/[^a-z0-9]+/g, '-')}`;
  return (
    <>
      <button
        type="button"
        aria-label={props.ariaLabel}
        aria-haspopup="dialog"
        disabled={props.disabled}
        onClick={() => dialog.current?.showModal()}
      >
        {props.label}
      </button>
      <dialog ref={dialog} aria-labelledby={id} class="confirm">
        <article>
          <h2 id={id}>{props.title}</h2>
          <p>{props.children}</p>
          <footer>
            <button
              type="button"
              class="danger"
              onClick={() => {
                dialog.current?.close();
                void props.onConfirm();
              }}
            >
              {props.confirmLabel}
            </button>
            <button type="button" onClick={() => dialog.current?.close()}>
              Cancel
            </button>
          </footer>
        </article>
      </dialog>
    </>
  );
}

/**
 * A box a wide table scrolls in, so the page itself never scrolls sideways on a phone. It takes keyboard focus
 * (WCAG 2.1.1; axe-core's `scrollable-region-focusable`): a keyboard user scrolls it with the arrow keys.
 */
export function ScrollBox(props: { label: string; children: ComponentChildren }) {
  return (
    // biome-ignore lint/a11y/noNoninteractiveTabindex: a scrollable region must be reachable by keyboard (WCAG 2.1.1).
    <section class="scroll overflow-auto" aria-label={props.label} tabIndex={0}>
      {props.children}
    </section>
  );
}
