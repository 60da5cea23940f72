import { useState } from 'preact/hooks';
import { api } from '../api.ts';
import { Notice, useAction } from '../ui.tsx';

/**
 * Changes the signed-in user's password: the current one and a new one (at least 12 characters, typed twice).
 * The server answers a wrong current password with 400 and signs out the user's other browsers.
 */
export function PasswordPage() {
  const [current, setCurrent] = useState('');
  const [next, setNext] = useState('');
  const [again, setAgain] = useState('');
  const { busy, error, ok, run } = useAction();
  const [mismatch, setMismatch] = useState<string | null>(null);
  const submit = async (event: Event) => {
    event.preventDefault();
    setMismatch(next === again ? null : 'the new passwords differ');
    if (next !== again) return;
    const done = await run(
      () => api('POST', '/password', { currentPassword: current, newPassword: next }),
      'Password changed; your other browsers were signed out.',
    );
    if (done !== undefined) {
      setCurrent('');
      setNext('');
      setAgain('');
    }
  };
  return (
    <>
      <h1 tabIndex={-1}>Your password</h1>
      <form onSubmit={submit} class="card narrow">
        <label for="current-password">Current password</label>
        <input
          id="current-password"
          type="password"
          autocomplete="current-password"
          required
          value={current}
          onInput={(e) => setCurrent(e.currentTarget.value)}
        />
        <label for="new-password">New password (at least 12 characters)</label>
        <input
          id="new-password"
          type="password"
          autocomplete="new-password"
          required
          minLength={12}
          value={next}
          onInput={(e) => setNext(e.currentTarget.value)}
        />
        <label for="new-password-again">New password again</label>
        <input
          id="new-password-again"
          type="password"
          autocomplete="new-password"
          required
          value={again}
          onInput={(e) => setAgain(e.currentTarget.value)}
        />
        <button type="submit" disabled={busy}>
          Change password
        </button>
        <Notice error={mismatch ?? error} ok={ok} />
      </form>
    </>
  );
}
