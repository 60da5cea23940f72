import { useState } from 'preact/hooks';
import { api, type Me, setCsrfToken } from '../api.ts';
import { Notice, useAction } from '../ui.tsx';

/** The sign-in form: e-mail and password; the server answers wrong credentials and slowed attempts (429 with the seconds to wait) in words. */
export function SignInPage(props: { onSignedIn: (me: Me) => void }) {
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const { busy, error, run } = useAction();
  const submit = async (event: Event) => {
    event.preventDefault();
    const signedIn = await run(() =>
      api<{ user: Me['user']; csrfToken: string }>('POST', '/sign-in', { email, password }),
    );
    if (!signedIn) return;
    setCsrfToken(signedIn.csrfToken);
    props.onSignedIn(await api<Me>('GET', '/me'));
  };
  return (
    <main class="sign-in">
      <h1 tabIndex={-1}>Sign in to parley</h1>
      <form onSubmit={submit} class="card">
        <label for="email">E-mail</label>
        <input
          id="email"
          type="email"
          autocomplete="username"
          required
          value={email}
          onInput={(e) => setEmail(e.currentTarget.value)}
        />
        <label for="password">Password</label>
        <input
          id="password"
          type="password"
          autocomplete="current-password"
          required
          value={password}
          onInput={(e) => setPassword(e.currentTarget.value)}
        />
        <button type="submit" disabled={busy}>
          Sign in
        </button>
        <Notice error={error} />
      </form>
    </main>
  );
}
