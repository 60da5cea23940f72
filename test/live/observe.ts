/**
 * Helpers shared by the live contacts, LID and history tests: waiting for a webhook the receiver got, reading
 * stored message rows, signed gateway calls (docs/gateway.md) and what the simulator saw a device send (key
 * bundle fetches, outgoing `<message>` stanzas).
 */
import { createHmac } from 'node:crypto';
import { type BinaryNode, getBinaryNodeChild, getBinaryNodeChildren, jidDecode } from 'baileys';
import type { DeviceStanza } from '../../sim/server/session.ts';
import { type OutgoingMessage, parseOutgoingMessage } from '../../sim/signal/index.ts';
import type { Simulator } from '../../sim/simulator.ts';
import type { ApiResponse } from '../support/app.ts';
import type { ReceivedRequest, Receiver } from '../support/https-receiver.ts';
import { bodies } from '../webhooks/support.ts';
import { type LiveApp, until } from './support.ts';

/** The first webhook body `receiver` got that matches `predicate` (with its request), waiting for it. */
export function waitForWebhook(
  receiver: Receiver,
  predicate: (body: any) => boolean,
  what: string,
): Promise<{ body: any; request: ReceivedRequest }> {
  return until(what, () => {
    const all = bodies(receiver.requests);
    const index = all.findIndex(predicate);
    const request = receiver.requests[index];
    return index < 0 || !request ? undefined : { body: all[index], request };
  });
}

/** The stored message row `id` of the app's live instance, or undefined. */
export async function messageRow(app: LiveApp, id: string) {
  return app.t.services.store.db
    .selectFrom('messages')
    .selectAll()
    .where('instance_id', '=', app.instanceId)
    .where('id', '=', id)
    .executeTakeFirst();
}

/**
 * A client of the gateway form for the live instance, signing every request with `hmacKey` (docs/gateway.md:
 * hex HMAC-SHA256 over `<x-timestamp>.<METHOD>.<path with query>.<raw body>`). parley's clock is frozen in
 * these tests, so each call takes a timestamp one second earlier than the last (within the 300 s window): no
 * two signatures repeat.
 */
export function gatewayClient(app: LiveApp, hmacKey: string) {
  let calls = 0;
  return async (method: 'GET' | 'POST', pathWithQuery: string, body?: unknown): Promise<ApiResponse> => {
    const raw = body === undefined ? '' : JSON.stringify(body);
    const timestamp = String(Math.floor(app.t.clock() / 1000) - (calls++ % 290));
    const signature = createHmac('sha256', hmacKey)
      .update(`${timestamp}.${method}.${pathWithQuery}.${raw}`)
      .digest('hex');
    const response = await app.t.app.inject({
      method,
      url: pathWithQuery,
      headers: {
        authorization: `Bearer ${app.liveKey}`,
        'x-instance-id': app.instanceId,
        'x-timestamp': timestamp,
        'x-signature': signature,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { payload: raw }),
    });
    return {
      status: response.statusCode,
      headers: response.headers,
      body: response.body ? JSON.parse(response.body) : undefined,
      raw: response,
    };
  };
}

/** The user part of a JID (`123:4@lid` → `123`). */
function userOf(jid: string): string {
  return jidDecode(jid)?.user ?? '';
}

/**
 * Records what devices of `phone` send at the simulator from now on: the users whose pre-key bundles they fetch
 * (`<iq xmlns=encrypt type=get><key><user jid/>`, by user part), the users whose device lists they ask for
 * (usync `devices`), and their `<message>` stanzas, parsed.
 */
export function watchDevice(sim: Simulator, phone: string) {
  const fetched: string[] = [];
  const messages: OutgoingMessage[] = [];
  const deviceQueries: string[] = [];
  const onIq = ({ user, node }: DeviceStanza) => {
    if (user.phone !== phone) return;
    if (node.attrs.xmlns === 'usync') {
      const usync = getBinaryNodeChild(node, 'usync');
      if (!getBinaryNodeChild(getBinaryNodeChild(usync, 'query'), 'devices')) return;
      const users = getBinaryNodeChildren(getBinaryNodeChild(usync, 'list'), 'user');
      deviceQueries.push(...users.map((u: BinaryNode) => u.attrs.jid ?? ''));
      return;
    }
    if (node.attrs.xmlns !== 'encrypt' || node.attrs.type !== 'get') return;
    const users = getBinaryNodeChildren(getBinaryNodeChild(node, 'key'), 'user');
    fetched.push(...users.map((u: BinaryNode) => userOf(u.attrs.jid ?? '')));
  };
  const onStanza = ({ user, node }: DeviceStanza) => {
    if (user.phone === phone && node.tag === 'message') messages.push(parseOutgoingMessage(node));
  };
  sim.context.events.on('iq', onIq);
  sim.context.events.on('stanza', onStanza);
  return {
    /** Pre-key bundle fetches for the user whose phone or LID user part is given. */
    fetchesFor: (...users: string[]) => fetched.filter((u) => users.includes(u)),
    /** JIDs whose device lists were asked for (usync with the `devices` protocol), in order. */
    deviceQueries: () => [...deviceQueries],
    /** The `<message>` stanza with this id, once sent. */
    message: (id: string) =>
      until(`the <message> ${id} at the simulator`, () => messages.find((m) => m.id === id)),
    stop() {
      sim.context.events.off('iq', onIq);
      sim.context.events.off('stanza', onStanza);
    },
  };
}
