import type { Dispatcher } from 'undici';
import { lazyClient, type ImageApiClient, type Logger } from '../../api/client';
import type { HoldRegistry } from '../../api/holds';
import type { PollPlan } from '../../api/poll-plan';
import { PollTiming } from '../../api/poll-timing';
import type { ApiKeyProvider } from '../../api/api-key';
import type { ServiceConfig } from '../../api/service-config';
import type { Fingerprinter, LedgerStore } from '../../ledger';
import { guardedDownloadDispatcher } from '../download';
import { keyLedger, type KeyLedger } from './ledger-consult';

/** What the image-service activities need; tests pass fakes. */
export interface ImageActivityDeps {
  config: ServiceConfig;
  apiKey: ApiKeyProvider;
  dispatcher?: Dispatcher;
  downloadDispatcher?: Dispatcher;
  outputRoot: string;
  now: () => number;
  logger: Logger;
  holds?: HoldRegistry;
  /** When to poll: learnt from this process's creations, per model (see poll-plan.ts). */
  pollPlan: PollPlan;
  /** Whether the task queue has a rate limit: then a late first attempt means the key's rate binds. */
  taskQueueRateLimited: boolean;
  /** Jitter source in [0, 1). */
  random: () => number;
  /** The ledger store: what was asked and paid, shared by every worker and command of the deployment. */
  ledger: LedgerStore;
  /** The print of a request as this worker sends it (see requestFingerprinter). */
  fingerprintOf: Fingerprinter;
}

/** What every attempt of the image-service activities of one process shares: made once, by {@link imageRun}. */
export interface ImageRun {
  readonly deps: ImageActivityDeps;
  /** The service's client, made on first use. */
  readonly api: () => ImageApiClient;
  /** When to poll, and which limit binds (src/api/poll-timing.ts). */
  readonly timing: PollTiming;
  /** The ledger store's rules for a key (ledger-consult.ts, ledger-writes.ts). */
  readonly keys: KeyLedger;
  /** The dispatcher images are downloaded through: the one given, else the guarded one, made on first use. */
  readonly downloadDispatcher: () => Dispatcher;
}

export function imageRun(deps: ImageActivityDeps): ImageRun {
  let downloadDispatcher = deps.downloadDispatcher;
  return {
    deps,
    api: lazyClient(deps),
    timing: new PollTiming({
      // The plan always tells which limit binds (rows report it to their batch); it times polls only when learning.
      plan: deps.pollPlan,
      learn: deps.config.pollPlan === 'learn',
      taskQueueRateLimited: deps.taskQueueRateLimited,
      logger: deps.logger,
      now: deps.now,
    }),
    keys: keyLedger({
      store: deps.ledger,
      fingerprintOf: deps.fingerprintOf,
      idempotencyWindowMs: deps.config.idempotencyWindowMs,
      now: deps.now,
      logger: deps.logger,
    }),
    downloadDispatcher: () => (downloadDispatcher ??= guardedDownloadDispatcher(deps.config)),
  };
}
