import { requestBody } from '../api/client';
import { keyPlaceOf } from '../api/key-carrier';
import type { ServiceConfig } from '../api/service-config';
import { requestPrint, type Fingerprinter, type LedgerStore } from '../ledger';
import type { LedgerScope } from '../model';
import { toApplicationFailure } from './failures';

/**
 * The ledger store as the activities meet it: the print of a request, and the refusal of another store. The rules a
 * key's activity applies are in create-image/ledger-consult.ts (before it sends) and ledger-writes.ts (its answers).
 */

/**
 * A request's fingerprint as this worker sends it: the submit address and the body bytes shaped by the settings
 * (field names, template), without the idempotency key: with `IMAGEGEN_IDEMPOTENCY_FIELD`, the body sent holds the
 * key too, and the same request under another key (another batch, a re-run) is still the same request, paid once.
 * Where the key travels is part of the print of what a key sent (never of the fingerprint): a key whose answer is not
 * known is sent again only where the service saw it. A RequestShapeError when the settings cannot shape it.
 */
export function requestFingerprinter(config: ServiceConfig): Fingerprinter {
  const target = `${config.baseUrl}${config.submitPath}`;
  const keyPlace = keyPlaceOf(config);
  return (request) => requestPrint(target, JSON.stringify(requestBody(request, config)), keyPlace);
}

/**
 * Refuses (a Config failure, non-retryable) work for a command or batch that reads another store than this worker's:
 * two memories of what was paid. `whose` says whose store it is ("batch b was started on", "the command reads").
 */
export function refuseOtherStore(store: LedgerStore, storeId: string | undefined, whose: string): void {
  if (!storeId || storeId === store.id) return;
  throw toApplicationFailure({
    kind: 'config',
    message:
      `this worker's ledger store ${store.location} is not the one ${whose}: two memories of what was paid; give ` +
      'the worker and the commands one IMAGEBATCH_LEDGER',
  });
}

/** The two stores of a batch refused by a worker: the batch's first, as its start recorded it, then the worker's. */
export interface OtherStore {
  batchId: string;
  batch: Pick<LedgerScope, 'storeLocation' | 'storeKeys'>;
  worker: { location: string; keys: number | undefined };
}

/**
 * What to change when a worker's store is not its batch's: the side that knows less, so that following it pays
 * nothing the other side knows was paid. Each side's keys say which knows more; when both know some, what only the
 * other knows may be paid again, and the message says so. A batch stays bound to its store, and its rows, once
 * cancelled, are never run again under its id: moving to the worker's store takes a new batch id.
 */
export function otherStoreMessage({ batchId, batch, worker }: OtherStore): string {
  const count = (n: number | undefined) => (n === undefined ? '' : ` (${n} keys)`);
  const stores =
    `batch ${batchId} was started on the ledger store ${batch.storeLocation ?? '(not recorded)'}${count(batch.storeKeys)}, ` +
    `and this worker's is ${worker.location}${count(worker.keys)}: two memories of what was paid; nothing was sent`;
  if (batch.storeLocation === undefined || batch.storeKeys === undefined || worker.keys === undefined) {
    return `${stores}. Give the worker and the commands the batch's IMAGEBATCH_LEDGER, then imagebatch resume ${batchId}`;
  }
  const workerKnowsMore = worker.keys > batch.storeKeys;
  const otherKnows = workerKnowsMore ? batch.storeKeys : worker.keys;
  const other = workerKnowsMore ? batch.storeLocation : worker.location;
  const risk = otherKnows > 0 ? `; requests only ${other} knows may be paid again` : '';
  return workerKnowsMore
    ? `${stores}. This worker's store knows more: imagebatch cancel ${batchId}, then run the file again as a new ` +
        `batch (--batch-id ${batchId}-2) with IMAGEBATCH_LEDGER=${worker.location}${risk}`
    : `${stores}. Restart this worker with IMAGEBATCH_LEDGER=${batch.storeLocation}, then imagebatch resume ${batchId}${risk}`;
}

/** Refuses (a Config failure) a row of a batch recorded in another store than this worker's, saying which to change. */
export async function refuseOtherBatchStore(
  store: LedgerStore,
  scope: LedgerScope | undefined,
  batchId: string,
): Promise<void> {
  if (!scope?.storeId || scope.storeId === store.id) return;
  const keys = await store.lastKeyPosition().catch(() => undefined);
  throw toApplicationFailure({
    kind: 'config',
    message: otherStoreMessage({ batchId, batch: scope, worker: { location: store.location, keys } }),
  });
}
