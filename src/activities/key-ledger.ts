import { requestBody } from '../api/client';
import { keyPlaceOf } from '../api/key-carrier';
import type { ServiceConfig } from '../api/service-config';
import { requestPrint, type Fingerprinter, type LedgerStore } from '../ledger';
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
