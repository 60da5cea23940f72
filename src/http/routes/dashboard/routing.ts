import { setMaxListeners } from 'node:events';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { InstanceSummary } from '../../../app/dashboard-admin.ts';
import { askNode, isForwarded, routeInstanceRequest } from '../../plugins/forward.ts';
import { principalOf } from './guard.ts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * A dashboard route whose answer is a long-lived stream (server-sent events): on the node holding the
     * instance's session it is not counted as a request running on the instance, so handing the instance over
     * (a node stopping) does not wait for the stream to end.
     */
    stream?: true;
  }
}

/** Dashboard routes addressing one instance: `/instances/:id` and everything under it. */
const INSTANCE_ROUTE = /\/instances\/:id(\/|$)/;

/**
 * Several nodes on the dashboard (docs/decisions/0022-dashboard.md, docs/decisions/0008-leases-and-fencing.md), added
 * to the dashboard's context after its guard: a route under `/instances/:id` (status, connect, disconnect, logout, QR,
 * pairing code, sandbox helpers, webhook settings, webhook endpoints, the delivery logs, the events stream) runs on the
 * node holding the instance's session, as the API's instance routes do. In a `preHandler` (after the guard
 * authenticated the session and checked the CSRF token and role, and after validation), the instance is resolved within
 * the user's organization and {@link routeInstanceRequest} either lets the handler run here or forwards the request,
 * cookie and CSRF header included, to the owner, whose guard authenticates it again; the owner's answer (status,
 * headers, envelope, request id; an events stream as it comes) is returned unchanged. Handlers know nothing of it.
 * Without a cluster a request claiming to come from another node is refused, as the API refuses it.
 * @throws DomainError not_found `instance not found` (also another organization's); unauthenticated on a
 *   node-to-node call without the cluster secret; platform_unreachable when the owner did not answer.
 */
export function addInstanceRouting(app: FastifyInstance): void {
  const { cluster } = app.services;
  const { dashboard } = app.services.app;
  // Forwarded streams still open end when this node closes: the browser reconnects through a node that serves.
  const closing = new AbortController();
  // One listener per relayed stream: as many as there are open instance pages, so no listener-leak warning.
  setMaxListeners(0, closing.signal);
  app.addHook('preClose', async () => closing.abort());
  app.addHook('preHandler', async (request: FastifyRequest, reply: FastifyReply) => {
    const config = request.routeOptions.config;
    if (config?.dashboard === undefined || config.dashboard === 'public') return;
    if (!INSTANCE_ROUTE.test(request.routeOptions.url ?? '')) return;
    if (!cluster) {
      isForwarded(request, undefined);
      return;
    }
    const { id } = request.params as { id: string };
    const instance = await dashboard.instanceOf(principalOf(request).org.id, id);
    const options = { signal: closing.signal, untracked: config.stream === true };
    if (await routeInstanceRequest(cluster, request, reply, instance, options)) return reply;
  });
}

/**
 * An instance as the dashboard's list shows it: its summary, and `unreachable: true` when another node holds its
 * session and did not answer in time, so its status (`connected`, `loggedIn`, `reason`) is only this node's view
 * (not connected here) and not known (docs/decisions/0008-leases-and-fencing.md, "A node that does not answer").
 */
export type ListedInstance = InstanceSummary & { unreachable?: true };

/**
 * The organization's instance list as each instance's owner sees it (docs/decisions/0008-leases-and-fencing.md):
 * `local` was computed here, where only this node's sessions are known, so the summary (connected, logged in, reason)
 * of an instance whose session another live node holds is replaced by that node's. The request is asked of each such
 * node once, as it came (cookie included, authenticated again there), all at once; a node that asked this one answers
 * for itself only. Each question is bounded ({@link askNode}: `CLUSTER_ASK_TIMEOUT_SECONDS`, or that node's lease
 * expiring): a node that does not answer in time, or answers anything but a 200 with its list, leaves its instances'
 * summaries as seen here, marked `unreachable` (logged with a warning), and the list answers with the rest.
 * @throws DomainError unauthenticated on a node-to-node call without the cluster secret.
 */
export async function summariesFromOwners(
  app: FastifyInstance,
  request: FastifyRequest,
  local: InstanceSummary[],
): Promise<ListedInstance[]> {
  const { cluster } = app.services;
  if (!cluster || isForwarded(request, cluster) || local.length === 0) return local;
  const remote = await cluster.keeper.remoteOwners(local.map((summary) => summary.id));
  const fromOwner = new Map<string, InstanceSummary>();
  const unreachable = new Set<string>();
  await Promise.all(
    [...remote].map(async ([url, { owner, ids }]) => {
      try {
        // Its first instance stands for the node: a node that stopped serving one (dead, cut off) serves none.
        const answer = await askNode(cluster, request, { owner, url, instanceId: ids[0] ?? '' });
        if (answer.status !== 200) throw new Error(`${url} answered ${answer.status}`);
        const body = JSON.parse(answer.body.toString()) as { data?: { instances?: InstanceSummary[] } };
        for (const summary of body.data?.instances ?? []) {
          if (ids.includes(summary.id)) fromOwner.set(summary.id, summary);
        }
      } catch (error) {
        for (const id of ids) unreachable.add(id);
        request.log.warn({ err: error, node: url }, 'reading instance statuses from their node failed');
      }
    }),
  );
  return local.map((summary): ListedInstance => {
    const owned = fromOwner.get(summary.id);
    if (owned !== undefined) return owned;
    return unreachable.has(summary.id) ? { ...summary, unreachable: true } : summary;
  });
}
