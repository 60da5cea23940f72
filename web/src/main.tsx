import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { api, type Me, setCsrfToken, whenSignedOut } from './api.ts';
import { InstancePage } from './pages/instance.tsx';
import { InstancesPage } from './pages/instances.tsx';
import { KeysPage } from './pages/keys.tsx';
import { PasswordPage } from './pages/password.tsx';
import { SignInPage } from './pages/sign-in.tsx';
import { UsagePage } from './pages/usage.tsx';
import { UsersPage } from './pages/users.tsx';
// Pico CSS styles the semantic HTML; styles.css adds parley's own components
// (docs/decisions/0047-dashboard-style-library.md).
import '@picocss/pico/css/pico.min.css';
import './styles.css';

/** The page the hash names: `#/instances`, `#/instances/<id>`, `#/keys`, `#/usage`, `#/users`, `#/password`. */
function useHashRoute(): string[] {
  const read = () => (location.hash.replace(/^#\/?/, '') || 'instances').split('/');
  const [route, setRoute] = useState(read);
  useEffect(() => {
    const changed = () => setRoute(read());
    addEventListener('hashchange', changed);
    return () => removeEventListener('hashchange', changed);
  }, []);
  return route;
}

const PAGES = [
  { path: 'instances', label: 'Instances' },
  { path: 'keys', label: 'API keys' },
  { path: 'usage', label: 'Usage' },
  { path: 'users', label: 'Users', owner: true },
];

function App() {
  const [me, setMe] = useState<Me | null | undefined>(undefined);
  const route = useHashRoute();
  useEffect(() => {
    whenSignedOut(() => setMe(null));
    api<Me>('GET', '/me')
      .then((value) => {
        setCsrfToken(value.csrfToken);
        setMe(value);
      })
      .catch(() => setMe(null));
  }, []);
  useEffect(() => {
    document.querySelector<HTMLElement>('main h1')?.focus();
  }, [route.join('/')]);

  if (me === undefined) return <p class="loading">Loading…</p>;
  if (me === null)
    return (
      <SignInPage
        onSignedIn={(value) => {
          setCsrfToken(value.csrfToken);
          setMe(value);
        }}
      />
    );

  const signOut = async () => {
    await api('POST', '/sign-out').catch(() => undefined);
    setMe(null);
  };
  const [page, id] = route;
  let content = <InstancesPage me={me} />;
  if (page === 'instances' && id) content = <InstancePage me={me} id={id} />;
  else if (page === 'keys') content = <KeysPage me={me} />;
  else if (page === 'usage') content = <UsagePage />;
  else if (page === 'users' && me.user.role === 'owner') content = <UsersPage me={me} />;
  else if (page === 'password') content = <PasswordPage />;
  return (
    <>
      <a class="skip" href="#content">
        Skip to content
      </a>
      <header class="top">
        <span class="brand">parley</span>
        <nav aria-label="Main">
          <ul>
            {PAGES.filter((p) => !p.owner || me.user.role === 'owner').map((p) => (
              <li key={p.path}>
                <a href={`#/${p.path}`} aria-current={page === p.path ? 'page' : undefined}>
                  {p.label}
                </a>
              </li>
            ))}
          </ul>
        </nav>
        <span class="who">
          {me.user.email} ({me.user.role}) · {me.org.name} ·{' '}
          <a href="#/password" aria-current={page === 'password' ? 'page' : undefined}>
            Change password
          </a>
        </span>
        <button type="button" onClick={signOut}>
          Sign out
        </button>
      </header>
      <main id="content" class="container">
        {content}
      </main>
    </>
  );
}

const root = document.getElementById('app');
if (root) render(<App />, root);
