import { useEffect, useState } from 'preact/hooks';
import { api } from '../api.ts';
import { messageOf, Notice, Section, useAction, useLatestRead } from '../ui.tsx';

/** The account's profile as the dashboard API answers it (docs/api.md#profile). */
interface Profile {
  name: string;
  about: string;
  pictureUrl: string | null;
}

/** Reads a chosen file as a `data:` URI (what `PUT /profile` takes for `picture`). */
function dataUriOf(file: File): Promise<string> {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(String(reader.result));
    reader.onerror = () => reject(reader.error ?? new Error('the file could not be read'));
    reader.readAsDataURL(file);
  });
}

/**
 * The account's own profile of a linked, connected instance (docs/decisions/0039-profile-privacy-blocklist.md): its
 * display name, about text and picture, as the platform shows them to others. A member changes the name and about
 * text, and uploads a new picture (JPEG, PNG or WEBP, at most 5 MB; the server checks it); a viewer only reads.
 */
export function ProfilePanel(props: { id: string; canManage: boolean }) {
  const base = `/instances/${props.id}/profile`;
  const [profile, setProfile] = useState<Profile | null>(null);
  const [loadError, setLoadError] = useState<string | null>(null);
  const [name, setName] = useState('');
  const [about, setAbout] = useState('');
  const [picture, setPicture] = useState<File | null>(null);
  const action = useAction();
  const shown = (value: Profile) => {
    setProfile(value);
    setName(value.name);
    setAbout(value.about);
  };
  // Read again for another instance: until its profile answers nothing of the previous one is shown (nor saved here),
  // and the previous instance's read, answering or failing later, is not shown.
  const beginRead = useLatestRead();
  useEffect(() => {
    const latest = beginRead();
    setProfile(null);
    setLoadError(null);
    setPicture(null);
    api<Profile>('GET', base)
      .then((value) => {
        if (latest()) shown(value);
      })
      .catch((e) => {
        if (latest()) setLoadError(messageOf(e));
      });
  }, [props.id]);

  const save = async (event: Event) => {
    event.preventDefault();
    if (!profile) return;
    const latest = beginRead();
    const changed = await action.run(async () => {
      const body: Record<string, string> = {};
      if (name !== profile.name) body.name = name;
      if (about !== profile.about) body.about = about;
      if (picture) body.picture = await dataUriOf(picture);
      if (Object.keys(body).length === 0)
        throw new Error('Nothing to save: change the name, the about text or the picture');
      return api<Profile>('PUT', base, body);
    }, 'Profile saved');
    if (changed && latest()) {
      shown(changed);
      setPicture(null);
    }
  };

  return (
    <Section title="Profile">
      <Notice error={loadError} />
      {profile && (
        <>
          <dl class="facts">
            <dt>Name</dt>
            <dd>{profile.name || '—'}</dd>
            <dt>About</dt>
            <dd>{profile.about || '—'}</dd>
            <dt>Picture</dt>
            <dd>
              {profile.pictureUrl ? (
                <a href={profile.pictureUrl} target="_blank" rel="noreferrer">
                  current picture
                </a>
              ) : (
                'none'
              )}
            </dd>
          </dl>
          {props.canManage && (
            <form onSubmit={save}>
              <div class="row">
                <div>
                  <label for="profile-name">Name (up to 25 characters)</label>
                  <input
                    id="profile-name"
                    maxLength={25}
                    value={name}
                    onInput={(e) => setName(e.currentTarget.value)}
                  />
                </div>
                <div>
                  <label for="profile-about">About (up to 139 characters)</label>
                  <input
                    id="profile-about"
                    maxLength={139}
                    value={about}
                    onInput={(e) => setAbout(e.currentTarget.value)}
                  />
                </div>
                <div>
                  <label for="profile-picture">New picture (JPEG, PNG or WEBP, at most 5 MB)</label>
                  <input
                    id="profile-picture"
                    type="file"
                    accept="image/jpeg,image/png,image/webp"
                    onChange={(e) => setPicture(e.currentTarget.files?.[0] ?? null)}
                  />
                </div>
              </div>
              <button type="submit" disabled={action.busy}>
                Save profile
              </button>
              <Notice error={action.error} ok={action.ok} />
            </form>
          )}
        </>
      )}
    </Section>
  );
}

/**
 * The users a linked, connected instance blocked (docs/decisions/0039-profile-privacy-blocklist.md): their numbers,
 * each with an Unblock button, and a form to block a number. Blocked users' messages and calls no longer reach the
 * account. A viewer sees the list only.
 */
export function BlocklistPanel(props: { id: string; canManage: boolean }) {
  const base = `/instances/${props.id}`;
  const [phones, setPhones] = useState<string[] | null>(null);
  const [loadError, setLoadError] = useState<string | null>(null);
  const [phone, setPhone] = useState('');
  const action = useAction();
  // The list a block or an unblock answers is newer than a read started before it; another instance's list replaces
  // the previous one's, whose read, answering or failing later, is not shown.
  const beginRead = useLatestRead();
  useEffect(() => {
    const latest = beginRead();
    setPhones(null);
    setLoadError(null);
    api<{ phones: string[] }>('GET', `${base}/blocklist`)
      .then((data) => {
        if (latest()) setPhones(data.phones);
      })
      .catch((e) => {
        if (latest()) setLoadError(messageOf(e));
      });
  }, [props.id]);

  const change = async (verb: 'block' | 'unblock', number: string) => {
    const done = verb === 'block' ? `Blocked ${number}` : `Unblocked ${number}`;
    const latest = beginRead();
    const data = await action.run(
      () => api<{ phones: string[] }>('POST', `${base}/${verb}`, { phone: number }),
      done,
    );
    if (data && latest()) {
      setPhones(data.phones);
      setLoadError(null);
    }
    return data;
  };
  const block = async (event: Event) => {
    event.preventDefault();
    if (await change('block', phone.trim())) setPhone('');
  };

  return (
    <Section title="Blocked users">
      <Notice error={loadError} />
      {phones && phones.length === 0 && <p>Nobody is blocked.</p>}
      {phones && phones.length > 0 && (
        <ul>
          {phones.map((number) => (
            <li key={number}>
              <code>{number}</code>{' '}
              {props.canManage && (
                <button type="button" disabled={action.busy} onClick={() => void change('unblock', number)}>
                  Unblock <span class="visually-hidden">{number}</span>
                </button>
              )}
            </li>
          ))}
        </ul>
      )}
      {props.canManage && (
        <form class="row" onSubmit={block}>
          <div>
            <label for="block-phone">Block a number (digits, international format)</label>
            <input
              id="block-phone"
              inputMode="numeric"
              value={phone}
              onInput={(e) => setPhone(e.currentTarget.value)}
            />
          </div>
          <button type="submit" disabled={action.busy || phone.trim() === ''}>
            Block
          </button>
        </form>
      )}
      <Notice error={action.error} ok={action.ok} />
    </Section>
  );
}
