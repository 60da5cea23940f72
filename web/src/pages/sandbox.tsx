import { useState } from 'preact/hooks';
import { api } from '../api.ts';
import { Notice, Section, useAction } from '../ui.tsx';

/**
 * The sandbox helpers of a test instance: play the phone (scan the QR), a user sending a message, a receipt, a
 * presence, so webhooks can be seen firing without a phone.
 */
export function SandboxPanel(props: { id: string; code: string | undefined }) {
  const base = `/instances/${props.id}/sandbox`;
  const [scanPhone, setScanPhone] = useState('');
  const [fromPhone, setFromPhone] = useState('5511988887777');
  const [body, setBody] = useState('Hello from the sandbox');
  const [messageId, setMessageId] = useState('');
  const [receiptState, setReceiptState] = useState('read');
  const [presencePhone, setPresencePhone] = useState('5511988887777');
  const [presenceState, setPresenceState] = useState('composing');
  const { busy, error, ok, run } = useAction();
  const post = (path: string, payload: object, done: (data: Record<string, string>) => string) =>
    run(() => api<Record<string, string>>('POST', `${base}/${path}`, payload), done);
  const submit = (handler: () => unknown) => (event: Event) => {
    event.preventDefault();
    void handler();
  };
  return (
    <Section title="Sandbox">
      <p>This is a test instance: play the phone and the people writing to it.</p>
      <form
        class="row"
        onSubmit={submit(() =>
          post(
            'scan',
            { ...(props.code ? { code: props.code } : {}), ...(scanPhone ? { phone: scanPhone } : {}) },
            (d) => d.details ?? 'Scanned',
          ),
        )}
      >
        <div>
          <label for="scan-phone">Phone that scans (optional)</label>
          <input
            id="scan-phone"
            inputMode="numeric"
            value={scanPhone}
            onInput={(e) => setScanPhone(e.currentTarget.value)}
          />
        </div>
        <button type="submit" disabled={busy}>
          Scan the QR code
        </button>
      </form>
      <form
        class="row"
        onSubmit={submit(async () => {
          const sent = await post(
            'inbound',
            { phone: fromPhone, body },
            (d) => `Message ${d.id ?? ''} received`,
          );
          if (sent?.id) setMessageId(sent.id);
        })}
      >
        <div>
          <label for="inbound-phone">From phone</label>
          <input
            id="inbound-phone"
            inputMode="numeric"
            value={fromPhone}
            onInput={(e) => setFromPhone(e.currentTarget.value)}
          />
        </div>
        <div>
          <label for="inbound-body">Message text</label>
          <input id="inbound-body" value={body} onInput={(e) => setBody(e.currentTarget.value)} />
        </div>
        <button type="submit" disabled={busy}>
          Send inbound message
        </button>
      </form>
      <form
        class="row"
        onSubmit={submit(() =>
          post('receipt', { id: messageId, state: receiptState }, (d) => d.details ?? 'Receipt sent'),
        )}
      >
        <div>
          <label for="receipt-id">Sent message id</label>
          <input id="receipt-id" value={messageId} onInput={(e) => setMessageId(e.currentTarget.value)} />
        </div>
        <div>
          <label for="receipt-state">Receipt</label>
          <select
            id="receipt-state"
            value={receiptState}
            onChange={(e) => setReceiptState(e.currentTarget.value)}
          >
            <option value="delivered">delivered</option>
            <option value="read">read</option>
            <option value="played">played</option>
          </select>
        </div>
        <button type="submit" disabled={busy}>
          Send receipt
        </button>
      </form>
      <form
        class="row"
        onSubmit={submit(() =>
          post(
            'presence',
            { phone: presencePhone, state: presenceState },
            (d) => d.details ?? 'Presence sent',
          ),
        )}
      >
        <div>
          <label for="presence-phone">Typing phone</label>
          <input
            id="presence-phone"
            inputMode="numeric"
            value={presencePhone}
            onInput={(e) => setPresencePhone(e.currentTarget.value)}
          />
        </div>
        <div>
          <label for="presence-state">Presence</label>
          <select
            id="presence-state"
            value={presenceState}
            onChange={(e) => setPresenceState(e.currentTarget.value)}
          >
            <option value="composing">composing</option>
            <option value="recording">recording</option>
            <option value="paused">paused</option>
          </select>
        </div>
        <button type="submit" disabled={busy}>
          Send presence
        </button>
      </form>
      <Notice error={error} ok={ok} />
    </Section>
  );
}
