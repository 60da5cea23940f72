import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import SQLite from 'better-sqlite3';
import { migrateToLatest, openStore } from '../../src/store/database.ts';
import { newRowId } from '../../src/store/row-ids.ts';
import { ratioOf, type ScenarioResult, target } from '../lib/report.ts';

/** Settings of the row-id scenario. */
export interface RowIdSettings {
  /** Events already stored before the measured part (the depth of the indexes), per side. */
  existing: number;
  /** Events written in the measured part, per side. */
  events: number;
  /** Events per transaction (a recorder batch; then one transaction of their attempts). */
  perCommit: number;
}

/** One side's figures: events written per second and pages written to the WAL per event. */
interface Side {
  eventsPerS: number;
  pagesPerEvent: number;
}

const PAYLOAD = JSON.stringify({ type: 'Message', body: 'x'.repeat(360) });

/**
 * Writes `settings.existing` then `settings.events` webhook events with ids from `makeId`, each with its delivery,
 * then their attempts, on parley's own SQLite schema (migrated), `perCommit` events a transaction. The automatic
 * checkpoint is replaced by a passive checkpoint after each commit, so the WAL frames a commit wrote are counted
 * and the copy into the database is part of the time, as it is of parley's.
 */
async function writeSide(settings: RowIdSettings, makeId: () => string): Promise<Side> {
  const dir = mkdtempSync(join(tmpdir(), 'parley-bench-rowids-'));
  const path = join(dir, 'parley.db');
  try {
    const store = await openStore({ dialect: 'sqlite', path });
    await migrateToLatest(store);
    await store.destroy();
    const db = new SQLite(path);
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = NORMAL');
    // No organization or instance rows: the rows' own writes are measured, not the foreign-key lookups.
    db.pragma('foreign_keys = OFF');
    const event = db.prepare(
      `insert into webhook_events (id, instance_id, sequence, type, payload, skip_reason, created_at)
       values (?, 'i1', ?, 'Message', ?, null, ?)`,
    );
    const delivery = db.prepare(
      `insert into webhook_deliveries (event_id, instance_id, sequence, status, attempts, max_attempts, run_at,
         created_at, updated_at, endpoint_id) values (?, 'i1', ?, 'pending', 0, 8, ?, ?, ?, '')`,
    );
    const attempt = db.prepare(
      `insert into webhook_attempts (id, event_id, number, url, worker, attempted_at, finished_at, status_code,
         duration_ms, endpoint_id) values (?, ?, 1, 'https://receiver.example/hook', 'w1', ?, ?, 200, 3, '')`,
    );
    const delivered = db.prepare(
      `update webhook_deliveries set status = 'delivered', attempts = 1, delivered_at = ?, updated_at = ?
       where event_id = ? and endpoint_id = ''`,
    );
    let sequence = 0;
    const record = db.transaction((ids: string[]) => {
      const now = Date.now();
      for (const id of ids) {
        sequence += 1;
        event.run(id, sequence, PAYLOAD, now);
        delivery.run(id, sequence, now, now, now);
      }
    });
    const finish = db.transaction((ids: string[]) => {
      const now = Date.now();
      for (const id of ids) {
        attempt.run(makeId(), id, now, now);
        delivered.run(now, now, id);
      }
    });
    const batch = () => Array.from({ length: settings.perCommit }, makeId);
    for (let written = 0; written < settings.existing; written += settings.perCommit) {
      const ids = batch();
      record(ids);
      finish(ids);
    }
    db.pragma('wal_checkpoint(TRUNCATE)');
    db.pragma('wal_autocheckpoint = 0');
    const checkpoint = () => (db.pragma('wal_checkpoint(PASSIVE)') as { log: number }[])[0]?.log ?? 0;
    let frames = 0;
    const started = process.hrtime.bigint();
    for (let written = 0; written < settings.events; written += settings.perCommit) {
      const ids = batch();
      record(ids);
      frames += checkpoint();
      finish(ids);
      frames += checkpoint();
    }
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    db.close();
    return { eventsPerS: Math.round(settings.events / seconds), pagesPerEvent: frames / settings.events };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Scenario 9: the store's write cost per event with parley's row ids (time-ordered UUIDs, src/store/row-ids.ts)
 * against random UUIDs (version 4, what parley used before) on the same schema, same machine, same run: events per
 * second and WAL pages written per event (docs/decisions/0052-time-ordered-row-ids.md). The sides alternate twice
 * and each keeps its better run, so a slow moment of the shared machine falls on one run, not one side.
 */
export async function rowIdScenario(settings: RowIdSettings): Promise<ScenarioResult> {
  const runs: { random: Side; ordered: Side }[] = [];
  for (let round = 0; round < 2; round += 1) {
    runs.push({
      random: await writeSide(settings, randomUUID),
      ordered: await writeSide(settings, newRowId),
    });
  }
  const best = (side: 'random' | 'ordered'): Side =>
    runs.map((run) => run[side]).reduce((a, b) => (b.eventsPerS > a.eventsPerS ? b : a));
  const random = best('random');
  const ordered = best('ordered');
  const pages = (side: Side) => Math.round(side.pagesPerEvent * 100) / 100;
  return {
    id: 'row-ids',
    title: '9. row ids (SQLite write per event)',
    unit: 'events/s',
    value: ordered.eventsPerS,
    baseline: random.eventsPerS,
    ratio: ratioOf(ordered.eventsPerS, random.eventsPerS),
    summary:
      `WAL pages per event ${pages(ordered)} vs ${pages(random)} with random ids; ` +
      `${settings.events} events over ${settings.existing} stored, ${settings.perCommit} a commit`,
    targets: [target('fewer pages per event than random ids', pages(random) - pages(ordered), '>=', 0.01)],
    details: { settings, runs },
  };
}
