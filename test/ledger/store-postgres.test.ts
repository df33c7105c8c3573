import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openLedgerStore } from '../../src/ledger';
import { startTestPostgres, type TestPostgres } from '../helpers/postgres';
import { storeContract } from './store-contract';

let server: TestPostgres | undefined;
let databases = 0;

beforeAll(async () => {
  server = await startTestPostgres();
});
afterAll(async () => {
  await server?.stop();
});

storeContract('PostgreSQL', async () => {
  const url = await server!.createDatabase(`ledger_${++databases}`);
  return openLedgerStore({ kind: 'postgres', url });
});

describe('ledger store: PostgreSQL, shared', () => {
  it('is one store for every process that opens its URL: the same id, and decisions made once across them', async () => {
    const url = await server!.createDatabase('shared');
    const [a, b] = await Promise.all([
      openLedgerStore({ kind: 'postgres', url }),
      openLedgerStore({ kind: 'postgres', url }),
    ]);
    try {
      expect(a.id).toBe(b.id);
      const ask = (store: typeof a, batchId: string) =>
        store.decide({
          batchId,
          rowId: 'r',
          idempotencyKey: `ib/${batchId}/r/a1`,
          request: { prompt: 'p', model: 'm' },
          requestSha256: 'same-body',
          fingerprint: 'same',
          outDir: '/out',
          reuse: true,
        });
      const decisions = await Promise.all(Array.from({ length: 10 }, (_, i) => ask(i % 2 ? a : b, `batch-${i}`)));
      expect(decisions.filter((d) => d.kind === 'send')).toHaveLength(1);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });
});
