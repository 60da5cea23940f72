import type { FastifyInstance } from 'fastify';
import { gatewayPlugin } from '../gateway/plugin.ts';
import { dashboardRoutes } from './dashboard/index.ts';
import { opsRoutes } from './ops.ts';
import { callsRoutes } from './v1/calls.ts';
import { channelRoutes } from './v1/channels.ts';
import { chatPresenceRoutes } from './v1/chat-presence.ts';
import { chatsRoutes, messageReadRoutes } from './v1/chats.ts';
import { contactsRoutes } from './v1/contacts.ts';
import { eventStreamRoutes } from './v1/event-stream.ts';
import { eventRoutes } from './v1/events.ts';
import { groupAdminRoutes } from './v1/group-admin.ts';
import { groupsRoutes } from './v1/groups.ts';
import { instancesRoutes } from './v1/instances.ts';
import { messagesRoutes } from './v1/messages.ts';
import { sandboxRoutes } from './v1/sandbox.ts';
import { sandboxCallRoutes } from './v1/sandbox-calls.ts';
import { sandboxGroupRoutes } from './v1/sandbox-groups.ts';
import { sandboxMediaRoutes } from './v1/sandbox-media.ts';
import { sessionRoutes } from './v1/session.ts';
import { webhookRoutes } from './v1/webhook.ts';
import { webhookEndpointRoutes } from './v1/webhook-endpoints.ts';

/** Every route of the API, registered in one place so the layout tells where each lives. */
export async function routes(app: FastifyInstance): Promise<void> {
  await app.register(gatewayPlugin);
  await app.register(opsRoutes);
  await app.register(instancesRoutes, { prefix: '/v1/instances' });
  await app.register(sessionRoutes, { prefix: '/v1/session' });
  await app.register(sandboxRoutes, { prefix: '/v1/sandbox' });
  await app.register(sandboxCallRoutes, { prefix: '/v1/sandbox' });
  await app.register(sandboxGroupRoutes, { prefix: '/v1/sandbox' });
  await app.register(sandboxMediaRoutes, { prefix: '/v1/sandbox' });
  await app.register(messagesRoutes, { prefix: '/v1/messages' });
  await app.register(messageReadRoutes, { prefix: '/v1/messages' });
  await app.register(chatsRoutes, { prefix: '/v1/chats' });
  await app.register(callsRoutes, { prefix: '/v1/calls' });
  await app.register(channelRoutes, { prefix: '/v1/channels' });
  await app.register(contactsRoutes, { prefix: '/v1/contacts' });
  await app.register(groupsRoutes, { prefix: '/v1/groups' });
  await app.register(groupAdminRoutes, { prefix: '/v1/groups' });
  await app.register(chatPresenceRoutes, { prefix: '/v1/chats' });
  await app.register(webhookRoutes, { prefix: '/v1/webhook' });
  await app.register(webhookEndpointRoutes, { prefix: '/v1/webhooks' });
  await app.register(eventRoutes, { prefix: '/v1/events' });
  await app.register(eventStreamRoutes, { prefix: '/v1/events' });
  await app.register(dashboardRoutes, {});
}
