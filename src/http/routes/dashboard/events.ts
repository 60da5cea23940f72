import type { ServerResponse } from 'node:http';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance } from 'fastify';
import type { LiveChange } from '../../../app/dashboard-admin.ts';
import { DomainError } from '../../../domain/errors.ts';
import { principalOf, type Role, roleAtLeast, SESSION_COOKIE } from './guard.ts';
import { InstanceParams, instanceFor, qrOf } from './instances.ts';

/** Comment line sent this often on an idle stream so proxies keep it open, ms. */
const KEEPALIVE_MS = 25_000;

/**
 * `GET /dashboard/api/instances/:id/events`: the live view of one instance as server-sent events
 * (docs/decisions/0022-dashboard.md, WHATWG HTML "Server-sent events"). Events: `status` (the instance summary) at
 * once and after every connection change the recorder commits; `qr` (the current QR code, or null when none) at once,
 * after every status change and when the shown code expires (the next one replaces it), always null for a viewer (the
 * code links a number to the instance: members and owners only); `deliveries` (no data) when
 * an event entered the webhook log or a delivery attempt finished, for the page to reload the log (at most once a
 * turn of the event loop). A client that stops reading holds at most the latest event of each name here. Nothing
 * is polled: changes come from the recorder's live feed and the webhook worker, and QR rotation from the code's own
 * expiry time.
 * Both are this process's: on several nodes the stream is served by the node holding the instance's session
 * (routing.ts), where its connection changes and new events are recorded; a delivery attempt finished by another
 * node's worker is not announced.
 */
export async function eventRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { dashboard, session, dashboardAuth } = app.services.app;
  const open = new Set<ServerResponse>();
  /** Set once the server began to close: a stream whose request was still in its hooks then is ended at once. */
  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
    for (const stream of open) stream.end();
  });

  app.get(
    '/instances/:id/events',
    { config: { dashboard: 'viewer', stream: true }, schema: { hide: true, params: InstanceParams } },
    async (request, reply) => {
      const orgId = principalOf(request).org.id;
      /** The user's role as of the last check of the session: a viewer (also one demoted meanwhile) gets no QR code. */
      let role: Role = principalOf(request).user.role;
      const instance = await instanceFor(app, request);
      reply.hijack();
      const raw = reply.raw;
      raw.writeHead(200, {
        'content-type': 'text/event-stream; charset=utf-8',
        'cache-control': 'no-store',
        connection: 'keep-alive',
        'x-request-id': request.id,
        'x-accel-buffering': 'no',
      });
      open.add(raw);
      // The close began while this request was in its hooks (the session's check, the instance's read): the
      // preClose hook ran before it was open, so it ends here, or it would hold the server's close until its deadline.
      if (closing) raw.end();
      let closed = false;
      let qrTimer: NodeJS.Timeout | undefined;
      let keepalive: NodeJS.Timeout | undefined;
      let unsubscribe: () => void = () => undefined;
      // Ended by the server's stop (preClose) before its connection closed, the stream takes no more writes: a write
      // after the end would raise an error no one listens to.
      const writable = () => !closed && !raw.writableEnded && !raw.destroyed;
      raw.on('close', () => {
        closed = true;
        open.delete(raw);
        unsubscribe();
        clearTimeout(qrTimer);
        clearInterval(keepalive);
      });
      // A client that reads slower than changes come is sent only the latest of each event once it has read what
      // was written: the memory a stream holds stays one event of each name, however long the client stalls.
      const held = new Map<string, unknown>();
      const send = (event: string, data: unknown) => {
        if (!writable()) return;
        if (raw.writableNeedDrain) {
          // The latest of each name, in the order they last came (a status before the QR read after it).
          held.delete(event);
          held.set(event, data);
        } else raw.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
      };
      raw.on('drain', () => {
        const latest = [...held];
        held.clear();
        for (const [event, data] of latest) send(event, data);
      });
      const sendQr = async (fromTimer = false) => {
        clearTimeout(qrTimer);
        if (fromTimer && !(await endUnlessSignedIn())) return;
        if (!roleAtLeast(role, 'member')) {
          send('qr', null);
          return;
        }
        try {
          const pairing = await session.pairingCode(instance);
          const qr = await qrOf(pairing);
          // The client may have left during the reads: no timer outlives its stream.
          if (!writable()) return;
          send('qr', qr);
          // The next code is due when this one expires: re-read it then (a little after, to be past the edge). One
          // timer a stream, whichever read set it last.
          clearTimeout(qrTimer);
          qrTimer = setTimeout(
            () => void sendQr(true),
            Math.max(0, pairing.expiresAt - app.services.clock()) + 250,
          );
        } catch (error) {
          if (!(error instanceof DomainError)) request.log.warn({ err: error }, 'reading the QR code failed');
          send('qr', null);
        }
      };
      const sendStatus = async () => {
        try {
          send('status', await dashboard.instance(orgId, instance.id));
        } catch (error) {
          request.log.warn({ err: error }, 'reading the instance status failed');
        }
      };
      // The stream lives as long as its session (docs/dashboard.md "Signing in"): sign-out, the user's removal, a
      // password change elsewhere or the session's expiry end it at the next change or keepalive, before anything
      // more is written. The browser's reconnect is then refused (401).
      const sessionId = request.cookies[SESSION_COOKIE];
      const signedIn = async () => {
        try {
          const principal = await dashboardAuth.authenticate(sessionId);
          role = principal.user.role;
          return principal.org.id === orgId;
        } catch (error) {
          // The session is gone (or no longer allowed); a store that cannot answer right now ends nothing.
          return !(
            error instanceof DomainError &&
            (error.code === 'unauthenticated' || error.code === 'forbidden')
          );
        }
      };
      const endUnlessSignedIn = async () => {
        if (await signedIn()) return true;
        if (!raw.writableEnded) raw.end();
        return false;
      };
      let deliveriesDue = false;
      let watching: () => void;
      try {
        watching = await dashboard.watch(orgId, instance.id, (change: LiveChange) => {
          if (change === 'deliveries') {
            // One signal a turn of the event loop, however many events a burst committed in it.
            if (deliveriesDue) return;
            deliveriesDue = true;
            setImmediate(() => {
              void endUnlessSignedIn().then((yes) => {
                deliveriesDue = false;
                if (yes) send('deliveries', {});
              });
            });
          } else
            void endUnlessSignedIn().then(async (yes) => {
              if (yes) await sendStatus().then(() => sendQr());
            });
        });
      } catch (error) {
        // The response is hijacked: end it here (the instance went away meanwhile, or the store failed).
        request.log.warn({ err: error }, 'watching the instance failed');
        open.delete(raw);
        raw.end();
        return;
      }
      // A client that left before the close listener was set, or while the watch was being set up: nothing is kept.
      if (!writable()) {
        watching();
        open.delete(raw);
        return;
      }
      unsubscribe = watching;
      keepalive = setInterval(() => {
        void endUnlessSignedIn().then((yes) => {
          if (yes && writable() && !raw.writableNeedDrain) raw.write(': keepalive\n\n');
        });
      }, KEEPALIVE_MS);
      raw.write('retry: 2000\n\n');
      await sendStatus();
      await sendQr();
    },
  );
}
