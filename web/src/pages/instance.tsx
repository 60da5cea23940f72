import { useEffect, useState } from 'preact/hooks';
import { api, type InstanceSummary, type Me, statusText, statusTone } from '../api.ts';
import {
  Badge,
  ConfirmButton,
  messageOf,
  Notice,
  Section,
  Time,
  useAction,
  useLatestRead,
  when,
} from '../ui.tsx';
import { ConversationsPanel } from './conversations.tsx';
import { EndpointsPanel } from './endpoints.tsx';
import { EventLogPanel } from './event-log.tsx';
import { HealthPanel } from './health.tsx';
import { BlocklistPanel, ProfilePanel } from './profile.tsx';
import { SandboxPanel } from './sandbox.tsx';
import { WebhookPanel } from './webhook.tsx';

interface Qr {
  qrCode: string;
  code: string;
  expiresAt: string;
}

/**
 * One instance: its state, connect / disconnect / logout (confirmed first), deletion for owners, the QR code pushed
 * live by the server (replaced as it rotates), the pairing-code alternative, the conversations, the health charts, the
 * webhook, the extra webhook endpoints, for test instances the sandbox helpers and, once linked and connected, the
 * account's profile and blocked users.
 */
export function InstancePage(props: { me: Me; id: string }) {
  const { id } = props;
  // The summary shown, with the route's id it was read or pushed for (the server also answers an id in capitals).
  const [shown, setShown] = useState<{ id: string; instance: InstanceSummary } | null>(null);
  const setInstance = (value: InstanceSummary) => setShown({ id, instance: value });
  const [qr, setQr] = useState<Qr | null>(null);
  const [deliveriesVersion, setDeliveriesVersion] = useState(0);
  const [loadError, setLoadError] = useState<{ id: string; message: string } | null>(null);
  const [live, setLive] = useState(false);
  const action = useAction();
  const canManage = props.me.user.role !== 'viewer';
  // The read, the actions' answers and the pushed statuses share one order: a pushed status counts as a read that
  // answered at once, so a read or an action started before it and answering later does not replace it, nor does
  // anything read for the instance shown before (docs/dashboard.md "Live updates").
  const beginRead = useLatestRead();

  useEffect(() => {
    // Another instance: nothing of the previous one stays on show, its QR code included.
    setQr(null);
    setLive(false);
    const latest = beginRead();
    api<InstanceSummary>('GET', `/instances/${id}`)
      .then((value) => {
        if (latest()) setInstance(value);
      })
      .catch((e) => {
        if (latest()) setLoadError({ id, message: messageOf(e) });
      });
    const source = new EventSource(`/dashboard/api/instances/${id}/events`);
    source.onopen = () => setLive(true);
    source.onerror = () => setLive(false);
    source.addEventListener('status', (e) => {
      beginRead();
      setInstance(JSON.parse((e as MessageEvent<string>).data));
      setLoadError(null);
    });
    source.addEventListener('qr', (e) => setQr(JSON.parse((e as MessageEvent<string>).data)));
    source.addEventListener('deliveries', () => setDeliveriesVersion((v) => v + 1));
    return () => source.close();
  }, [id]);

  if (loadError?.id === id) return <Notice error={loadError.message} />;
  // Until this instance is read (or pushed), the previous instance's summary is not this page's.
  const instance = shown?.id === id ? shown.instance : null;
  if (!instance) return <p class="loading">Loading…</p>;
  const call = (path: string, done: string) =>
    action.run(async () => {
      const latest = beginRead();
      const value = await api<InstanceSummary>('POST', `/instances/${id}/${path}`);
      if (latest()) setInstance(value);
    }, done);

  return (
    <>
      <p>
        <a href="#/instances">← All instances</a>
      </p>
      <h1 tabIndex={-1}>
        {instance.name} <Badge tone={instance.env === 'live' ? 'info' : 'off'}>{instance.env}</Badge>
      </h1>
      <Section title="Session">
        <dl class="facts">
          <dt>Status</dt>
          <dd>
            <output id="instance-status" aria-live="polite" class={`badge tone-${statusTone(instance)}`}>
              {statusText(instance)}
            </output>
          </dd>
          <dt>Linked number</dt>
          <dd>{instance.phone ?? 'not linked'}</dd>
          <dt>Last close reason</dt>
          <dd>{instance.reason ?? '—'}</dd>
          <dt>Last connected</dt>
          <dd>
            <Time value={instance.lastConnectedAt} />
          </dd>
          <dt>Live updates</dt>
          <dd>{live ? 'on' : 'reconnecting…'}</dd>
          <dt>Instance id</dt>
          <dd>
            <code>{instance.id}</code>
          </dd>
        </dl>
        {canManage && (
          <div class="row">
            <button type="button" disabled={action.busy} onClick={() => call('connect', 'Connect requested')}>
              Connect
            </button>
            <button type="button" disabled={action.busy} onClick={() => call('disconnect', 'Disconnected')}>
              Disconnect
            </button>
            <ConfirmButton
              label="Log out"
              title={`Log out ${instance.name}?`}
              confirmLabel="Log out"
              disabled={action.busy}
              onConfirm={() => call('logout', 'Logged out')}
            >
              The phone unlinks this device and the session's credentials are deleted: linking again needs a
              new QR scan or pairing code on the phone.
            </ConfirmButton>
            {props.me.user.role === 'owner' && (
              <ConfirmButton
                label="Delete instance"
                title={`Delete ${instance.name}?`}
                confirmLabel="Delete instance"
                disabled={action.busy}
                onConfirm={() =>
                  action.run(async () => {
                    await api('DELETE', `/instances/${id}`);
                    window.location.hash = '#/instances';
                  })
                }
              >
                The number is logged out and every message, event, delivery and webhook endpoint of this
                instance is deleted. This cannot be undone.
              </ConfirmButton>
            )}
          </div>
        )}
        <Notice error={action.error} ok={action.ok} />
        {qr && !instance.loggedIn && <QrPanel qr={qr} />}
        {canManage && instance.env === 'live' && !instance.loggedIn && <PairingCode id={id} />}
      </Section>
      <ConversationsPanel id={id} canManage={canManage} version={deliveriesVersion} />
      <HealthPanel instanceId={id} names={{ [id]: instance.name }} version={deliveriesVersion} />
      {instance.env === 'test' && canManage && <SandboxPanel id={id} code={qr?.code} />}
      {instance.loggedIn && instance.connected && (
        <>
          <ProfilePanel id={id} canManage={canManage} />
          <BlocklistPanel id={id} canManage={canManage} />
        </>
      )}
      <WebhookPanel id={id} canManage={canManage} version={deliveriesVersion} />
      <EndpointsPanel id={id} canManage={canManage} version={deliveriesVersion} />
      <EventLogPanel id={id} version={deliveriesVersion} />
    </>
  );
}

function QrPanel(props: { qr: Qr }) {
  return (
    <figure class="qr">
      <img
        src={props.qr.qrCode}
        alt="QR code: scan it with WhatsApp, Linked devices"
        data-code={props.qr.code}
      />
      <figcaption>
        Open WhatsApp on the phone → Linked devices → Link a device, and scan. This code is replaced at{' '}
        {when(props.qr.expiresAt)}.
      </figcaption>
    </figure>
  );
}

function PairingCode(props: { id: string }) {
  const [phone, setPhone] = useState('');
  const { busy, error, ok, run } = useAction();
  const submit = (event: Event) => {
    event.preventDefault();
    void run(
      () => api<{ pairingCode: string }>('POST', `/instances/${props.id}/pairing-code`, { phone }),
      (value) => `Type this code on the phone: ${value.pairingCode}`,
    );
  };
  return (
    <form onSubmit={submit} class="row">
      <div>
        <label for="pairing-phone">Or link by code: phone number (digits, international format)</label>
        <input
          id="pairing-phone"
          inputMode="numeric"
          value={phone}
          onInput={(e) => setPhone(e.currentTarget.value)}
        />
      </div>
      <button type="submit" disabled={busy}>
        Get pairing code
      </button>
      <Notice error={error} ok={ok} />
    </form>
  );
}
