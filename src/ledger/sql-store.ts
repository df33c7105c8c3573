import { randomUUID } from 'node:crypto';
import { ImagebatchError, type RowRecord } from '../model';
import {
  isKeyEvent,
  LEDGER_VERSION,
  type BatchEvent,
  type LedgerEvent,
  type LedgerKey,
  type LedgerRow,
  type NewLedgerEvent,
  type RowEvent,
} from './events';
import { foldKey } from './rules';
import { chargesSeen, IN_CHUNK, NOTHING_HELD, paidCounts, summarize } from './sql-reports';
import {
  LedgerUnavailableError,
  type ChargeSeen,
  type SummaryGroup,
  type DecideInput,
  type Decision,
  type KeyPage,
  type LedgerStore,
  type ServiceProof,
  type RowPage,
  type SummaryRow,
} from './store';
import { SCHEMA_VERSION, schemaStatements, type Sql, type SqlDriver } from './sql';

interface KeyRow {
  state: string;
}
interface RowRow {
  seq: number;
  batch_id: string;
  row_id: string;
  record: string | null;
  record_by: string | null;
  reused_from: string | null;
}

/** The store over a SQL database: the same statements on SQLite and PostgreSQL. */
export class SqlLedgerStore implements LedgerStore {
  private constructor(
    private readonly driver: SqlDriver,
    readonly location: string,
    readonly id: string,
  ) {}

  /** Opens the store: makes its tables when they are missing, and refuses one written by a newer version. */
  static async open(driver: SqlDriver, location: string): Promise<SqlLedgerStore> {
    const id = await driver.transaction(async (sql) => {
      await sql.lock('imagebatch-ledger-schema');
      for (const statement of schemaStatements(driver.dialect)) await sql.run(statement);
      const meta = new Map(
        (await sql.all<{ name: string; value: string }>('SELECT name, value FROM ledger_meta')).map((m) => [
          m.name,
          m.value,
        ]),
      );
      const version = Number(meta.get('schema') ?? SCHEMA_VERSION);
      if (version > SCHEMA_VERSION) {
        throw new LedgerUnavailableError(
          location,
          `it was written by a newer imagebatch (schema ${version}; this one knows ${SCHEMA_VERSION}): upgrade`,
        );
      }
      const existing = meta.get('store_id');
      if (existing) return existing;
      const made = randomUUID();
      await sql.run('INSERT INTO ledger_meta (name, value) VALUES (?, ?), (?, ?)', [
        'schema',
        String(SCHEMA_VERSION),
        'store_id',
        made,
      ]);
      return made;
    });
    return new SqlLedgerStore(driver, location, id);
  }

  async append(events: readonly NewLedgerEvent[], now = Date.now()): Promise<void> {
    if (events.length === 0) return;
    const stamped = events.map((e) => stamp(e, now));
    await this.tx(async (sql) => {
      for (const event of stamped) await this.apply(sql, event, now);
    });
  }

  async decide(input: DecideInput, now = Date.now()): Promise<Decision> {
    return this.tx(async (sql) => {
      await sql.lock(`fingerprint:${input.fingerprint}`);
      const bound = await sql.get<{ reused_from: string | null }>(
        'SELECT reused_from FROM ledger_rows WHERE batch_id = ? AND row_id = ?',
        [input.batchId, input.rowId],
      );
      if (bound?.reused_from) {
        const source = await this.keyIn(sql, bound.reused_from);
        if (source) return { kind: 'reuse', source };
      }
      const known = await this.keyIn(sql, input.idempotencyKey);
      if (known) return { kind: 'known', key: known };
      if (input.reuse) {
        const candidate = await sql.get<KeyRow>(
          `SELECT k.state FROM ledger_keys k
           WHERE k.fingerprint = ? AND k.batch_id <> ?
             AND (k.outcome IS NULL OR k.outcome NOT IN (${NOTHING_HELD}))
             AND NOT EXISTS (SELECT 1 FROM ledger_rows r WHERE r.batch_id = ? AND r.reused_from = k.idempotency_key)
           ORDER BY CASE WHEN k.outcome = 'succeeded' THEN 0 WHEN k.outcome IS NULL THEN 1 ELSE 2 END, k.seq
           LIMIT 1`,
          [input.fingerprint, input.batchId, input.batchId],
        );
        if (candidate) {
          const source = JSON.parse(candidate.state) as LedgerKey;
          await this.touchRow(sql, input.batchId, input.rowId, now);
          await sql.run('UPDATE ledger_rows SET reused_from = ?, updated_at = ? WHERE batch_id = ? AND row_id = ?', [
            source.idempotencyKey,
            now,
            input.batchId,
            input.rowId,
          ]);
          return { kind: 'reuse', source };
        }
      }
      const { batchId, rowId, idempotencyKey, request, requestSha256, fingerprint, outDir } = input;
      const sending = {
        type: 'sending',
        ...{ batchId, rowId, idempotencyKey, request, requestSha256, fingerprint, outDir },
      } as const;
      await this.apply(sql, stamp(sending, now), now);
      return { kind: 'send' };
    });
  }

  async unbind(batchId: string, rowId: string, sourceKey: string): Promise<void> {
    await this.tx((sql) =>
      sql.run('UPDATE ledger_rows SET reused_from = NULL WHERE batch_id = ? AND row_id = ? AND reused_from = ?', [
        batchId,
        rowId,
        sourceKey,
      ]),
    );
  }

  async key(idempotencyKey: string): Promise<LedgerKey | undefined> {
    return this.tx((sql) => this.keyIn(sql, idempotencyKey), true);
  }

  async row(batchId: string, rowId: string): Promise<LedgerRow | undefined> {
    return (await this.rowsOf(batchId, [rowId])).get(rowId);
  }

  async rowsOf(batchId: string, rowIds: readonly string[]): Promise<Map<string, LedgerRow>> {
    const out = new Map<string, LedgerRow>();
    await this.tx(async (sql) => {
      for (let i = 0; i < rowIds.length; i += IN_CHUNK) {
        const ids = rowIds.slice(i, i + IN_CHUNK);
        const marks = ids.map(() => '?').join(', ');
        const rows = await sql.all<RowRow>(
          `SELECT seq, batch_id, row_id, record, record_by, reused_from FROM ledger_rows
           WHERE batch_id = ? AND row_id IN (${marks})`,
          [batchId, ...ids],
        );
        for (const row of await this.withKeys(sql, batchId, rows)) out.set(row.rowId, row);
      }
    }, true);
    return out;
  }

  async rows(batchId: string, after: number, limit: number): Promise<RowPage> {
    return this.tx(async (sql) => {
      const rows = await sql.all<RowRow>(
        `SELECT seq, batch_id, row_id, record, record_by, reused_from FROM ledger_rows
         WHERE batch_id = ? AND seq > ? ORDER BY seq LIMIT ?`,
        [batchId, after, limit],
      );
      return {
        rows: await this.withKeys(sql, batchId, rows),
        next: rows.at(-1)?.seq ?? after,
        done: rows.length < limit,
      };
    }, true);
  }

  async batches(batchId: string): Promise<BatchEvent[]> {
    return this.tx(
      async (sql) =>
        (
          await sql.all<{ entry: string }>('SELECT entry FROM ledger_batches WHERE batch_id = ? ORDER BY seq', [
            batchId,
          ])
        ).map((r) => JSON.parse(r.entry) as BatchEvent),
      true,
    );
  }

  async summarize(by: SummaryGroup, batchId?: string): Promise<SummaryRow[]> {
    return this.tx((sql) => summarize(sql, this.driver.dialect, by, batchId), true);
  }

  async paidCounts(fingerprints: readonly string[]): Promise<Map<string, number>> {
    return this.tx((sql) => paidCounts(sql, fingerprints), true);
  }

  async chargesSeen(models: readonly string[]): Promise<Map<string, ChargeSeen>> {
    return this.tx((sql) => chargesSeen(sql, this.driver.dialect, models), true);
  }

  async keys(after: number, limit: number, batchId?: string): Promise<KeyPage> {
    const rows = await this.tx(
      (sql) =>
        sql.all<KeyRow & { seq: number }>(
          `SELECT seq, state FROM ledger_keys WHERE seq > ? ${batchId === undefined ? '' : 'AND batch_id = ?'}
           ORDER BY seq LIMIT ?`,
          batchId === undefined ? [after, limit] : [after, batchId, limit],
        ),
      true,
    );
    return {
      keys: rows.map((r) => JSON.parse(r.state) as LedgerKey),
      next: rows.at(-1)?.seq ?? after,
      done: rows.length < limit,
    };
  }

  async lastKeyPosition(): Promise<number> {
    const row = await this.tx(
      (sql) => sql.get<{ seq: number | null }>('SELECT MAX(seq) AS seq FROM ledger_keys'),
      true,
    );
    return Number(row?.seq ?? 0);
  }

  async serviceProof(settings: string): Promise<ServiceProof | undefined> {
    const row = await this.tx(
      (sql) =>
        sql.get<{ proof: string; at: number }>('SELECT proof, at FROM ledger_proofs WHERE settings = ?', [settings]),
      true,
    );
    return row ? { ...(JSON.parse(row.proof) as ServiceProof), atMs: Number(row.at) } : undefined;
  }

  async proveService(settings: string, proof: ServiceProof, now = Date.now()): Promise<void> {
    const { atMs: _at, ...kept } = proof;
    await this.tx(async (sql) => {
      const params = [JSON.stringify(kept), now, settings];
      const changed = await sql.run('UPDATE ledger_proofs SET proof = ?, at = ? WHERE settings = ?', params);
      if (changed === 0) {
        await sql.run('INSERT INTO ledger_proofs (proof, at, settings) VALUES (?, ?, ?)', params);
      }
    });
  }

  async importedBytes(file: string): Promise<number> {
    const row = await this.tx(
      (sql) => sql.get<{ bytes: number }>('SELECT bytes FROM ledger_imports WHERE file = ?', [file]),
      true,
    );
    return row ? Number(row.bytes) : 0;
  }

  async importEvents(file: string, events: readonly LedgerEvent[], bytes: number, now = Date.now()): Promise<void> {
    await this.tx(async (sql) => {
      for (const event of events) await this.apply(sql, event, now);
      const changed = await sql.run('UPDATE ledger_imports SET bytes = ?, at = ? WHERE file = ?', [bytes, now, file]);
      if (changed === 0)
        await sql.run('INSERT INTO ledger_imports (file, bytes, at) VALUES (?, ?, ?)', [file, bytes, now]);
    });
  }

  close(): Promise<void> {
    return this.driver.close();
  }

  /** One transaction; a failure of the database itself says where the store is. */
  private async tx<T>(work: (sql: Sql) => Promise<T>, readOnly = false): Promise<T> {
    try {
      return await this.driver.transaction(work, { readOnly });
    } catch (err) {
      if (err instanceof ImagebatchError) throw err;
      throw new LedgerUnavailableError(this.location, err instanceof Error ? err.message : String(err), { cause: err });
    }
  }

  private async apply(sql: Sql, event: LedgerEvent, now: number): Promise<void> {
    if (event.type === 'batch') {
      await sql.run('INSERT INTO ledger_batches (batch_id, at, entry) VALUES (?, ?, ?)', [
        event.batchId,
        Date.parse(event.at),
        JSON.stringify(event),
      ]);
      return;
    }
    if (event.type === 'row') {
      await this.writeRecord(sql, event, now);
      return;
    }
    if (!isKeyEvent(event)) return;
    const known = await this.keyIn(sql, event.idempotencyKey);
    const key = foldKey(known, event);
    if (!key) return; // an event of a key never sent: nothing to fold it into
    const columns = [key.ended?.outcome ?? null, key.creationId ?? null, key.costUsd ?? null, now, JSON.stringify(key)];
    if (known) {
      await sql.run(
        `UPDATE ledger_keys SET outcome = ?, creation_id = ?, cost_usd = ?, updated_at = ?, state = ?
         WHERE idempotency_key = ?`,
        [...columns, key.idempotencyKey],
      );
      return;
    }
    await this.touchRow(sql, key.batchId, key.rowId, now);
    await sql.run(
      `INSERT INTO ledger_keys (idempotency_key, batch_id, row_id, fingerprint, first_sent_at,
         outcome, creation_id, cost_usd, updated_at, state)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      [key.idempotencyKey, key.batchId, key.rowId, key.fingerprint, key.firstSentAtMs, ...columns],
    );
  }

  private async writeRecord(sql: Sql, event: RowEvent, now: number): Promise<void> {
    const { batchId, rowId } = event.record;
    await this.touchRow(sql, batchId, rowId, now);
    await sql.run(
      'UPDATE ledger_rows SET record = ?, record_by = ?, updated_at = ? WHERE batch_id = ? AND row_id = ?',
      [JSON.stringify(event.record), event.by, now, batchId, rowId],
    );
  }

  /** Makes the row known, if it was not: its place among the batch's rows is the first time the store heard of it. */
  private async touchRow(sql: Sql, batchId: string, rowId: string, now: number): Promise<void> {
    await sql.run(
      'INSERT INTO ledger_rows (batch_id, row_id, updated_at) VALUES (?, ?, ?) ON CONFLICT (batch_id, row_id) DO NOTHING',
      [batchId, rowId, now],
    );
  }

  private async keyIn(sql: Sql, idempotencyKey: string): Promise<LedgerKey | undefined> {
    const lock = this.driver.dialect === 'postgres' ? ' FOR UPDATE' : '';
    const row = await sql.get<KeyRow>(`SELECT state FROM ledger_keys WHERE idempotency_key = ?${lock}`, [
      idempotencyKey,
    ]);
    return row ? (JSON.parse(row.state) as LedgerKey) : undefined;
  }

  /** The rows with their keys, in the order given. */
  private async withKeys(sql: Sql, batchId: string, rows: readonly RowRow[]): Promise<LedgerRow[]> {
    if (rows.length === 0) return [];
    const marks = rows.map(() => '?').join(', ');
    const keys = await sql.all<KeyRow & { row_id: string }>(
      `SELECT row_id, state FROM ledger_keys WHERE batch_id = ? AND row_id IN (${marks}) ORDER BY seq`,
      [batchId, ...rows.map((r) => r.row_id)],
    );
    const byRow = new Map<string, LedgerKey[]>();
    for (const k of keys) {
      const list = byRow.get(k.row_id) ?? [];
      list.push(JSON.parse(k.state) as LedgerKey);
      byRow.set(k.row_id, list);
    }
    return rows.map((r) => ({
      batchId: r.batch_id,
      rowId: r.row_id,
      keys: byRow.get(r.row_id) ?? [],
      ...(r.record ? { record: JSON.parse(r.record) as RowRecord } : {}),
      ...(r.record_by ? { recordBy: r.record_by as RowEvent['by'] } : {}),
      ...(r.reused_from ? { reusedFrom: r.reused_from } : {}),
    }));
  }
}

function stamp(event: NewLedgerEvent, now: number): LedgerEvent {
  return { v: LEDGER_VERSION, at: new Date(now).toISOString(), ...event };
}
