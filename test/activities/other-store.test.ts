import { describe, expect, it } from 'vitest';
import { otherStoreMessage } from '../../src/activities/key-ledger';

/** What a worker says of a batch recorded in another store: both stores, the batch's first, and the side to change. */
describe("a worker's store that is not its batch's", () => {
  const batch = { storeLocation: '/home/u/.local/share/imagebatch/ledger.sqlite', storeKeys: 0 };
  const worker = { location: 'postgres://ib@db:5432/ledger', keys: 120 };

  it("the batch started on a store that knows less: cancel it, and a new batch on the worker's", () => {
    expect(otherStoreMessage({ batchId: 'b1', batch, worker })).toBe(
      'batch b1 was started on the ledger store /home/u/.local/share/imagebatch/ledger.sqlite (0 keys), and this ' +
        "worker's is postgres://ib@db:5432/ledger (120 keys): two memories of what was paid; nothing was sent. This " +
        "worker's store knows more: imagebatch cancel b1, then run the file again as a new batch (--batch-id b1-2) " +
        'with IMAGEBATCH_LEDGER=postgres://ib@db:5432/ledger',
    );
  });

  it("the worker on a store that knows less: restart it on the batch's, then resume", () => {
    const message = otherStoreMessage({
      batchId: 'b1',
      batch: { ...batch, storeKeys: 300 },
      worker: { ...worker, keys: 0 },
    });
    expect(message).toMatch(/^batch b1 was started on the ledger store \S+ledger\.sqlite \(300 keys\), and this/);
    expect(message).toMatch(
      /Restart this worker with IMAGEBATCH_LEDGER=\/home\/u\/\.local\/share\/imagebatch\/ledger\.sqlite, then imagebatch resume b1$/,
    );
  });

  it('both know some: the side that knows more, and that what only the other knows may be paid again', () => {
    const message = otherStoreMessage({ batchId: 'b1', batch: { ...batch, storeKeys: 5 }, worker });
    expect(message).toMatch(/imagebatch cancel b1, then .* with IMAGEBATCH_LEDGER=postgres:\/\/ib@db:5432\/ledger/);
    expect(message).toMatch(
      /; requests only \/home\/u\/\.local\/share\/imagebatch\/ledger\.sqlite knows may be paid again$/,
    );
  });

  it("a batch started before its store was recorded: the batch's setting, then resume", () => {
    const message = otherStoreMessage({ batchId: 'b1', batch: {}, worker });
    expect(message).toContain('started on the ledger store (not recorded)');
    expect(message).toMatch(
      /Give the worker and the commands the batch's IMAGEBATCH_LEDGER, then imagebatch resume b1$/,
    );
  });
});
