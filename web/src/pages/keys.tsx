import { useEffect, useState } from 'preact/hooks';
import { api, type InstanceSummary, type Me } from '../api.ts';
import {
  Badge,
  ConfirmButton,
  messageOf,
  Notice,
  ScrollBox,
  Section,
  Time,
  useAction,
  useLatestRead,
} from '../ui.tsx';

/**
 * The scopes a key may carry (src/domain/scope.ts); `chat:*` does not include `instances:manage`, and is a choice of
 * its own beside the narrower chat scopes (docs/decisions/0003-scopes-and-keys.md): ticking it clears them.
 */
const SCOPES = [
  'chat:*',
  'chat:session',
  'chat:messages',
  'chat:contacts',
  'chat:groups',
  'chat:webhook',
  'instances:manage',
];
/**
 * Scopes only an owner may put on a key (src/app/dashboard-admin.ts, docs/decisions/0022-dashboard.md):
 * `instances:manage` deletes instances, which members may not. The form does not offer them to members.
 */
const OWNER_ONLY_SCOPES = ['instances:manage'];
const EXPIRY = [
  { value: '', label: 'never' },
  { value: '1h', label: 'in 1 hour' },
  { value: '1d', label: 'in 1 day' },
  { value: '30d', label: 'in 30 days' },
  { value: '90d', label: 'in 90 days' },
];

interface Key {
  id: string;
  name: string;
  prefix: string;
  env: 'test' | 'live';
  scopes: string[];
  instances: string[];
  expiresAt: string | null;
  revokedAt: string | null;
  lastUsedAt: string | null;
}

/** API keys: create (the full key shown once, with a copy button), list with prefix, scopes and last use, revoke. */
export function KeysPage(props: { me: Me }) {
  const [keys, setKeys] = useState<Key[]>([]);
  const [instances, setInstances] = useState<InstanceSummary[]>([]);
  const [error, setError] = useState<string | null>(null);
  const [name, setName] = useState('');
  const [env, setEnv] = useState<'test' | 'live'>('test');
  const [scopes, setScopes] = useState<string[]>([]);
  /** The key about to be created, shown for confirmation; null while the form is edited. */
  const [review, setReview] = useState<boolean>(false);
  const [allowed, setAllowed] = useState<string[]>([]);
  const [expiresIn, setExpiresIn] = useState('');
  const [created, setCreated] = useState<string | null>(null);
  const [copied, setCopied] = useState<string | null>(null);
  const action = useAction();
  const canManage = props.me.user.role !== 'viewer';
  const owner = props.me.user.role === 'owner';
  const offered = owner ? SCOPES : SCOPES.filter((scope) => !OWNER_ONLY_SCOPES.includes(scope));
  // The keys are read when the page opens and again after each creation or revocation: only the latest started read
  // is shown, so a slow earlier read answering last never hides a new key nor shows a revoked one as active.
  const beginRead = useLatestRead();
  const load = () => {
    const latest = beginRead();
    return Promise.all([
      api<{ keys: Key[] }>('GET', '/keys'),
      api<{ instances: InstanceSummary[] }>('GET', '/instances'),
    ])
      .then(([k, i]) => {
        if (!latest()) return;
        setKeys(k.keys);
        setInstances(i.instances);
        setError(null);
      })
      .catch((e) => {
        if (latest()) setError(messageOf(e));
      });
  };
  useEffect(() => {
    void load();
  }, []);

  const toggle = (list: string[], value: string, on: boolean) =>
    on ? [...list, value] : list.filter((item) => item !== value);
  /** Ticks or clears `scope`; `chat:*` and the narrower chat scopes exclude each other. */
  const choose = (scope: string, on: boolean) => {
    if (!on) return setScopes(scopes.filter((item) => item !== scope));
    if (scope === 'chat:*') return setScopes([...scopes.filter((item) => !item.startsWith('chat:')), scope]);
    setScopes([...scopes.filter((item) => item !== 'chat:*'), scope]);
  };
  const allowedHere = allowed.filter((id) => instances.some((i) => i.id === id && i.env === env));
  const reviewKey = (event: Event) => {
    event.preventDefault();
    setCopied(null);
    setReview(true);
  };
  const submit = async () => {
    setReview(false);
    const made = await action.run(
      () =>
        api<{ key: string }>('POST', '/keys', {
          env,
          scopes,
          ...(name.trim() ? { name: name.trim() } : {}),
          instances: allowedHere,
          ...(expiresIn ? { expiresIn } : {}),
        }),
      'Key created',
    );
    if (made) {
      setCreated(made.key);
      setScopes([]);
      await load();
    }
  };
  const copy = async () => {
    if (!created) return;
    try {
      await navigator.clipboard.writeText(created);
      setCopied('Copied to the clipboard');
    } catch {
      setCopied('Copying failed: select the key and copy it by hand');
    }
  };
  const expiryLabel = EXPIRY.find((option) => option.value === expiresIn)?.label ?? expiresIn;
  const instanceNames = allowedHere.map((id) => instances.find((i) => i.id === id)?.name ?? id);
  const revoke = (key: Key) =>
    action.run(() => api('POST', `/keys/${key.id}/revoke`).then(load), `Key ${key.prefix}… revoked`);

  return (
    <>
      <h1 tabIndex={-1}>API keys</h1>
      <Notice error={error} />
      {canManage && (
        <Section title="Create a key">
          <form onSubmit={reviewKey}>
            <div class="row">
              <div>
                <label for="key-name">Name</label>
                <input
                  id="key-name"
                  maxLength={60}
                  value={name}
                  onInput={(e) => setName(e.currentTarget.value)}
                />
              </div>
              <div>
                <label for="key-env">Environment</label>
                <select
                  id="key-env"
                  value={env}
                  onChange={(e) => setEnv(e.currentTarget.value === 'live' ? 'live' : 'test')}
                >
                  <option value="test">test</option>
                  <option value="live">live</option>
                </select>
              </div>
              <div>
                <label for="key-expiry">Expires</label>
                <select
                  id="key-expiry"
                  value={expiresIn}
                  onChange={(e) => setExpiresIn(e.currentTarget.value)}
                >
                  {EXPIRY.map((option) => (
                    <option key={option.value} value={option.value}>
                      {option.label}
                    </option>
                  ))}
                </select>
              </div>
            </div>
            <fieldset>
              <legend>Scopes</legend>
              {offered.map((scope) => (
                <label key={scope} class="check">
                  <input
                    type="checkbox"
                    checked={scopes.includes(scope)}
                    onChange={(e) => choose(scope, e.currentTarget.checked)}
                  />
                  {scope}
                </label>
              ))}
              {!owner && (
                <p class="hint">
                  Only an owner can create a key with {OWNER_ONLY_SCOPES.join(', ')}: it deletes instances.
                </p>
              )}
            </fieldset>
            <fieldset>
              <legend>Instances it may address (none ticked: every {env} instance)</legend>
              {instances
                .filter((i) => i.env === env)
                .map((i) => (
                  <label key={i.id} class="check">
                    <input
                      type="checkbox"
                      checked={allowed.includes(i.id)}
                      onChange={(e) => setAllowed(toggle(allowed, i.id, e.currentTarget.checked))}
                    />
                    {i.name}
                  </label>
                ))}
            </fieldset>
            {!review && (
              <button type="submit" disabled={action.busy || scopes.length === 0}>
                Review key
              </button>
            )}
            {scopes.length === 0 && <p class="hint">Choose at least one scope.</p>}
          </form>
          {review && (
            <section class="summary" aria-label="Key to create">
              <p>
                A <strong>{env}</strong> key named <strong>{name.trim() || `${env} key`}</strong> with{' '}
                <strong>{scopes.join(', ')}</strong>
                {scopes.includes('chat:*') ? ' (every chat operation)' : ''}, for{' '}
                <strong>
                  {instanceNames.length === 0 ? `every ${env} instance` : instanceNames.join(', ')}
                </strong>
                , expiring <strong>{expiryLabel}</strong>.
              </p>
              <div class="row">
                <button type="button" class="primary" disabled={action.busy} onClick={submit}>
                  Create key
                </button>
                <button type="button" onClick={() => setReview(false)}>
                  Change
                </button>
              </div>
            </section>
          )}
          <Notice error={action.error} ok={action.ok} />
          {created && (
            <section class="secret" aria-label="New API key">
              <label for="new-key">Your new key: shown only this once, store it now</label>
              <div class="row">
                <input
                  id="new-key"
                  class="grow mono"
                  readOnly
                  value={created}
                  onFocus={(e) => e.currentTarget.select()}
                />
                <button type="button" onClick={copy}>
                  Copy key
                </button>
                <button type="button" onClick={() => setCreated(null)}>
                  Done
                </button>
              </div>
              <Notice ok={copied} />
            </section>
          )}
        </Section>
      )}
      <ScrollBox label="API keys, table">
        <table>
          <caption>Keys of this organization (values are never shown again)</caption>
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Prefix</th>
              <th scope="col">Env</th>
              <th scope="col">Scopes</th>
              <th scope="col">Instances</th>
              <th scope="col">Expires</th>
              <th scope="col">Last used</th>
              <th scope="col">State</th>
            </tr>
          </thead>
          <tbody>
            {keys.map((key) => (
              <tr key={key.id}>
                <td>{key.name}</td>
                <td class="mono">{key.prefix}…</td>
                <td>{key.env}</td>
                <td>{key.scopes.join(', ')}</td>
                <td>{key.instances.length === 0 ? 'all' : key.instances.length}</td>
                <td>
                  <Time value={key.expiresAt} />
                </td>
                <td>
                  <Time value={key.lastUsedAt} />
                </td>
                <td>
                  {key.revokedAt ? (
                    <>
                      <Badge tone="off">revoked</Badge> <Time value={key.revokedAt} />
                    </>
                  ) : canManage ? (
                    <ConfirmButton
                      label="Revoke"
                      ariaLabel={`Revoke key ${key.prefix}`}
                      title={`Revoke key ${key.prefix}…?`}
                      confirmLabel="Revoke key"
                      onConfirm={() => revoke(key)}
                    >
                      Requests with this key are refused at once. This cannot be undone: a new key would have
                      to be given to whatever uses it.
                    </ConfirmButton>
                  ) : (
                    'active'
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </ScrollBox>
    </>
  );
}
