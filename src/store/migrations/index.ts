import type { Migration, MigrationProvider } from 'kysely';
import * as core from './0001_core.ts';
import * as messages from './0002_messages.ts';
import * as webhooks from './0003_webhooks.ts';
import * as instanceLocks from './0004_instance_locks.ts';
import * as gatewayReplay from './0005_gateway_replay.ts';
import * as deliveryClaimIndex from './0006_delivery_claim_index.ts';
import * as webhookEventsCreated from './0007_webhook_events_created.ts';
import * as nodes from './0008_nodes.ts';
import * as rateLimitWindows from './0009_rate_limit_windows.ts';
import * as dashboardUsers from './0010_dashboard_users.ts';
import * as chatsCalls from './0011_chats_calls.ts';
import * as instanceLeases from './0012_instance_leases.ts';
import * as sendJobs from './0013_send_jobs.ts';
import * as idempotencyKeys from './0014_idempotency_keys.ts';
import * as timesAsEpochMs from './0015_times_as_epoch_ms.ts';
import * as instanceCap from './0016_instance_cap.ts';
import * as webhookEndpoints from './0017_webhook_endpoints.ts';
import * as brokerEndpoints from './0018_broker_endpoints.ts';
import * as lidMappings from './0019_lid_mappings.ts';
import * as labels from './0020_labels.ts';
import * as sendJobsLiveIndex from './0021_send_jobs_live_index.ts';
import * as deliveryLiveIndexes from './0022_delivery_live_indexes.ts';
import * as routingVersion from './0023_routing_version.ts';
import * as sendJobsLoggedOut from './0024_send_jobs_logged_out.ts';
import * as idempotencyHeaders from './0025_idempotency_headers.ts';
import * as idempotencyRequestId from './0026_idempotency_request_id.ts';
import * as sendPacingNewChatLock from './0027_send_pacing_new_chat_lock.ts';
import * as instanceListSignals from './0028_instance_list_signals.ts';
import * as sendJobsNotBefore from './0029_send_jobs_not_before.ts';
import * as syncSendJobAttempts from './0030_sync_send_job_attempts.ts';
import * as endpointPreviousSecret from './0031_endpoint_previous_secret.ts';
import * as nodeIdentity from './0032_node_identity.ts';
import * as lidChatsMoved from './0033_lid_chats_moved.ts';
import * as lidSendersRenamed from './0035_lid_senders_renamed.ts';
import * as recordedUpdates from './0037_recorded_updates.ts';
import * as heldReceipts from './0038_held_receipts.ts';
import * as instanceAccountGeneration from './0039_instance_account_generation.ts';

/**
 * Every migration, in order. Names are numbered; add a new file and list it here (never edit one that shipped).
 * One set serves both SQLite and PostgreSQL (docs/decisions/0024-engines-and-data-flow.md).
 */
export const migrations: Record<string, Migration> = {
  '0001_core': core,
  '0002_messages': messages,
  '0003_webhooks': webhooks,
  '0004_instance_locks': instanceLocks,
  '0005_gateway_replay': gatewayReplay,
  '0006_delivery_claim_index': deliveryClaimIndex,
  '0007_webhook_events_created': webhookEventsCreated,
  '0008_nodes': nodes,
  '0009_rate_limit_windows': rateLimitWindows,
  '0010_dashboard_users': dashboardUsers,
  '0011_chats_calls': chatsCalls,
  '0012_instance_leases': instanceLeases,
  '0013_send_jobs': sendJobs,
  '0014_idempotency_keys': idempotencyKeys,
  '0015_times_as_epoch_ms': timesAsEpochMs,
  '0016_instance_cap': instanceCap,
  '0017_webhook_endpoints': webhookEndpoints,
  '0018_broker_endpoints': brokerEndpoints,
  '0019_lid_mappings': lidMappings,
  '0020_labels': labels,
  '0021_send_jobs_live_index': sendJobsLiveIndex,
  '0022_delivery_live_indexes': deliveryLiveIndexes,
  '0023_routing_version': routingVersion,
  '0024_send_jobs_logged_out': sendJobsLoggedOut,
  '0025_idempotency_headers': idempotencyHeaders,
  '0026_idempotency_request_id': idempotencyRequestId,
  '0027_send_pacing_new_chat_lock': sendPacingNewChatLock,
  '0028_instance_list_signals': instanceListSignals,
  '0029_send_jobs_not_before': sendJobsNotBefore,
  '0030_sync_send_job_attempts': syncSendJobAttempts,
  '0031_endpoint_previous_secret': endpointPreviousSecret,
  '0032_node_identity': nodeIdentity,
  '0033_lid_chats_moved': lidChatsMoved,
  '0035_lid_senders_renamed': lidSendersRenamed,
  '0037_recorded_updates': recordedUpdates,
  '0038_held_receipts': heldReceipts,
  '0039_instance_account_generation': instanceAccountGeneration,
};

/** Hands Kysely's `Migrator` the in-code list above (no file-system scanning, so it works from any cwd). */
export const migrationProvider: MigrationProvider = {
  getMigrations: async () => migrations,
};
