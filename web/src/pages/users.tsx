import { useEffect, useState } from 'preact/hooks';
import { api, type Me } from '../api.ts';
import {
  ConfirmButton,
  messageOf,
  Notice,
  ScrollBox,
  Section,
  Time,
  useAction,
  useLatestRead,
} from '../ui.tsx';

interface User {
  id: string;
  email: string;
  role: 'owner' | 'member' | 'viewer';
  lastSignInAt: string | null;
}
const ROLES = ['owner', 'member', 'viewer'] as const;

/** Users and roles of the organization (owners only): add (a generated password shown once), change role, remove. */
export function UsersPage(props: { me: Me }) {
  const [users, setUsers] = useState<User[]>([]);
  const [error, setError] = useState<string | null>(null);
  const [email, setEmail] = useState('');
  const [role, setRole] = useState<User['role']>('member');
  const [password, setPassword] = useState<string | null>(null);
  const action = useAction();
  // The users are read when the page opens and again after each change: only the latest started read is shown, so a
  // slow earlier read answering last never hides a user just added, brings back a removed one or an earlier role.
  const beginRead = useLatestRead();
  const load = () => {
    const latest = beginRead();
    return api<{ users: User[] }>('GET', '/users')
      .then((d) => {
        if (!latest()) return;
        setUsers(d.users);
        setError(null);
      })
      .catch((e) => {
        if (latest()) setError(messageOf(e));
      });
  };
  useEffect(() => {
    void load();
  }, []);
  const submit = async (event: Event) => {
    event.preventDefault();
    const made = await action.run(
      () => api<{ user: User; password?: string }>('POST', '/users', { email, role }),
      'User added',
    );
    if (made) {
      setPassword(made.password ?? null);
      setEmail('');
      await load();
    }
  };
  return (
    <>
      <h1 tabIndex={-1}>Users</h1>
      <Notice error={error} />
      <Section title="Add a user">
        <form class="row" onSubmit={submit}>
          <div>
            <label for="user-email">E-mail</label>
            <input
              id="user-email"
              type="email"
              required
              value={email}
              onInput={(e) => setEmail(e.currentTarget.value)}
            />
          </div>
          <div>
            <label for="user-role">Role</label>
            <select
              id="user-role"
              value={role}
              onChange={(e) => setRole(e.currentTarget.value as User['role'])}
            >
              {ROLES.map((r) => (
                <option key={r} value={r}>
                  {r}
                </option>
              ))}
            </select>
          </div>
          <button type="submit" disabled={action.busy}>
            Add user
          </button>
        </form>
        {password && (
          <p class="secret" role="status">
            Their password (shown only this once): <code>{password}</code>
          </p>
        )}
        <Notice error={action.error} ok={action.ok} />
      </Section>
      <ScrollBox label="Users, table">
        <table>
          <caption>
            Owners manage everything; members manage instances, keys and webhooks; viewers read.
          </caption>
          <thead>
            <tr>
              <th scope="col">E-mail</th>
              <th scope="col">Role</th>
              <th scope="col">Last sign-in</th>
              <th scope="col">Action</th>
            </tr>
          </thead>
          <tbody>
            {users.map((user) => (
              <tr key={user.id}>
                <td>{user.email}</td>
                <td>
                  <select
                    aria-label={`Role of ${user.email}`}
                    value={user.role}
                    onChange={(e) =>
                      action.run(
                        () =>
                          api('PUT', `/users/${user.id}/role`, { role: e.currentTarget.value }).then(load),
                        'Role changed',
                      )
                    }
                  >
                    {ROLES.map((r) => (
                      <option key={r} value={r}>
                        {r}
                      </option>
                    ))}
                  </select>
                </td>
                <td>
                  <Time value={user.lastSignInAt} />
                </td>
                <td>
                  {user.id === props.me.user.id ? (
                    'you'
                  ) : (
                    <ConfirmButton
                      label="Remove"
                      ariaLabel={`Remove ${user.email}`}
                      title={`Remove ${user.email}?`}
                      confirmLabel="Remove user"
                      onConfirm={() =>
                        action.run(() => api('DELETE', `/users/${user.id}`).then(load), 'User removed')
                      }
                    >
                      {user.email} is signed out everywhere and can no longer sign in to this organization.
                    </ConfirmButton>
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
