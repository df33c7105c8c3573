import { Context } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import type { Dispatcher } from 'undici';
import { lazyApiKeyProvider, type ApiKeyProvider } from '../api/api-key';
import { loadApiKey } from '../config/api-key';
import { silentLogger, type Logger } from '../api/client';
import type { HoldRegistry } from '../api/holds';
import { PollPlan } from '../api/poll-plan';
import { loadServiceConfig } from '../config/service-config';
import { secretFilePaths } from '../config/known-settings';
import { type ServiceConfig } from '../api/service-config';
import type { LedgerStore } from '../ledger';
import type { RunResultsWriter } from '../model';
import { createBatchFileActivities } from './batch-file';
import { createDoctorActivities } from './doctor';
import { createScheduleActivities } from './schedule-activities';
import { createScheduledRunActivities } from './scheduled-run-activities';
import { createImageActivities } from './image-activities';
import { requestFingerprinter } from './key-ledger';
import { guardedDownloadDispatcher } from './download';
import { createLedgerActivities } from './ledger-activities';
import { createLedgerCheckActivities } from './ledger-check';
import { createServiceProofActivities, serviceProver } from './service-proof';
import { createRowActivities } from './rows';
import { createServiceCheckActivities } from './service-check';

/** What the activities need from the outside world; tests pass fakes. */
export interface ActivityDeps {
  /**
   * Current time in milliseconds.
   * @default Date.now
   */
  now?: () => number;
  /**
   * Image-service configuration.
   * @default loadServiceConfig(): the process's environment, read when the activities are created (throws ConfigError)
   */
  config?: ServiceConfig;
  /**
   * The API key. The worker should pass `lazyApiKeyProvider(() => loadApiKey())` after calling `loadApiKey()`
   * once at start-up, so that a missing or malformed key stops it before any work.
   * @default the key from IMAGEGEN_API_KEY / IMAGEGEN_API_KEY_FILE, read and checked on the first request
   */
  apiKey?: ApiKeyProvider;
  /**
   * Dispatcher for `{base_url}`.
   * @default a Pool on the base URL's origin with the configured timeouts
   */
  dispatcher?: Dispatcher;
  /**
   * Dispatcher for image downloads (any host; never given the key).
   * @default an Agent with the configured timeouts
   */
  downloadDispatcher?: Dispatcher;
  /**
   * Folder that relative output folders are resolved against.
   * @default process.cwd()
   */
  outputRoot?: string;
  /**
   * Where the activities log (never the key).
   * @default the Temporal activity logger
   */
  logger?: Logger;
  /**
   * Process-wide holds (Retry-After) of the image service.
   * @default one registry per createActivities call
   */
  holds?: HoldRegistry;
  /**
   * When to poll creations, learnt per model from this process's creations (poll-plan.ts).
   * @default one plan per createActivities call
   */
  pollPlan?: PollPlan;
  /**
   * Whether the task queue has a rate limit (`IMAGEBATCH_RATE_LIMIT`, set under the key's rate): a key's first
   * attempt that starts late then says the key's rate binds; without one it says only that the workers are busy.
   * @default false
   */
  taskQueueRateLimited?: boolean;
  /**
   * Jitter source in [0, 1).
   * @default Math.random
   */
  random?: () => number;
  /** Temporal client for `lookupRow` and a scheduled run's watch (they only read: no activity signals a workflow). */
  temporalClient?: Client;
  /**
   * Writes a scheduled run's result files when it ends (src/results, given by the worker: it sits above this layer).
   * @default none: a run's line in its schedule's runs.jsonl is written, its result files are not (a warning says so)
   */
  writeResults?: RunResultsWriter;
  /**
   * How often a scheduled run asks its batch's progress, to end on a hold only a person lifts.
   * @default RUN_WATCH_EVERY_MS (5 s)
   */
  scheduledRunWatchEveryMs?: number;
  /**
   * The ledger store (src/ledger): what was asked and paid, shared by every worker and command of the deployment.
   * The worker opens the one `IMAGEBATCH_LEDGER` names; tests give one of their own.
   */
  ledger: LedgerStore;
  /**
   * The files the secret settings (`*_FILE`) name: a schedule's source may never be one of them.
   * @default those of the worker's environment
   */
  secretFiles?: readonly string[];
}

/**
 * Builds the activities with their dependencies, in the style of Temporal's samples: the worker registers
 * the returned object, and workflows import only its type.
 */
export function createActivities(deps: ActivityDeps): Omit<StepActivities, StepActivityName> {
  const all = Object.entries(createActivitiesWithSteps(deps));
  return Object.fromEntries(all.filter(([name]) => !(STEP_ACTIVITIES as readonly string[]).includes(name))) as Omit<
    StepActivities,
    StepActivityName
  >;
}

/** The single-request activities: in {@link createActivitiesWithSteps}, never on the worker. */
const STEP_ACTIVITIES = ['submitCreation', 'pollCreation', 'downloadImages'] as const;
type StepActivityName = (typeof STEP_ACTIVITIES)[number];

/**
 * {@link createActivities} plus three single-request activities no workflow of ours schedules (`submitCreation`,
 * `pollCreation`, `downloadImages`): the contract and activity tests drive the service one request at a time
 * through them. The worker never registers them.
 */
export function createActivitiesWithSteps(deps: ActivityDeps) {
  const now = deps.now ?? Date.now;
  // Read (and validated) now, so that a wrong setting stops the worker at start-up, naming its variable.
  const config = deps.config ?? loadServiceConfig();
  const outputRoot = deps.outputRoot ?? process.cwd();
  // One key provider (the key file read once) and one fingerprinter for every activity.
  const apiKey = deps.apiKey ?? lazyApiKeyProvider(() => loadApiKey());
  const fingerprintOf = requestFingerprinter(config);
  const proveService = serviceProver({ config, ledger: deps.ledger, now });
  /** What the activities that ask the service without saving images share. */
  const serviceDeps = {
    config,
    apiKey,
    ...(deps.dispatcher ? { dispatcher: deps.dispatcher } : {}),
    ...(deps.holds ? { holds: deps.holds } : {}),
    now,
    logger: deps.logger ?? activityLogger,
  };
  const image = createImageActivities({
    config,
    apiKey,
    ...(deps.dispatcher ? { dispatcher: deps.dispatcher } : {}),
    ...(deps.downloadDispatcher ? { downloadDispatcher: deps.downloadDispatcher } : {}),
    ...(deps.holds ? { holds: deps.holds } : {}),
    pollPlan: deps.pollPlan ?? new PollPlan(),
    taskQueueRateLimited: deps.taskQueueRateLimited ?? false,
    outputRoot,
    now,
    logger: deps.logger ?? activityLogger,
    random: deps.random ?? Math.random,
    ledger: deps.ledger,
    fingerprintOf,
  });
  return {
    ...image,
    ...createBatchFileActivities({ outputRoot }),
    ...createScheduleActivities({
      outputRoot,
      ledger: { store: deps.ledger, fingerprintOf },
      ...(deps.temporalClient ? { temporalClient: deps.temporalClient } : {}),
      // A URL source passes the address guard of image downloads, whatever dispatcher the images use.
      sourceDispatcher: guardedDownloadDispatcher(config, 2),
      sourceFolders: { allowed: config.scheduleSources, secretFiles: deps.secretFiles ?? secretFilePaths() },
    }),
    ...createScheduledRunActivities({
      outputRoot,
      logger: deps.logger ?? activityLogger,
      ...(deps.temporalClient ? { temporalClient: deps.temporalClient } : {}),
      ...(deps.writeResults ? { writeResults: deps.writeResults } : {}),
      ...(deps.scheduledRunWatchEveryMs ? { watchEveryMs: deps.scheduledRunWatchEveryMs } : {}),
    }),
    ...createRowActivities({
      outputRoot,
      now,
      ledger: deps.ledger,
      ...(deps.temporalClient ? { temporalClient: deps.temporalClient } : {}),
    }),
    ...createLedgerActivities({ outputRoot, now, ledger: deps.ledger, fingerprintOf }),
    ...createServiceProofActivities({ config, ledger: deps.ledger, now }),
    ...createLedgerCheckActivities({ ...serviceDeps, ledger: deps.ledger }),
    ...createServiceCheckActivities(serviceDeps),
    ...createDoctorActivities({
      config,
      proveService: (creationId) => proveService({ by: 'doctor', creationId }),
      apiKey,
      ...(deps.dispatcher ? { dispatcher: deps.dispatcher } : {}),
      ...(deps.downloadDispatcher ? { downloadDispatcher: deps.downloadDispatcher } : {}),
      outputRoot,
      now,
    }),
  };
}

export type Activities = ReturnType<typeof createActivities>;
export type { RunWatch } from './scheduled-run-activities';
/** The activities of {@link createActivitiesWithSteps}, for tests that drive one request at a time. */
export type StepActivities = ReturnType<typeof createActivitiesWithSteps>;

/** The Temporal activity logger (it adds the activity's ids); silent outside an activity. */
const activityLogger: Logger = {
  debug: (m, meta) => logTo('debug', m, meta),
  info: (m, meta) => logTo('info', m, meta),
  warn: (m, meta) => logTo('warn', m, meta),
  error: (m, meta) => logTo('error', m, meta),
};

function logTo(level: keyof Logger, message: string, meta?: Record<string, unknown>): void {
  let log: Logger;
  try {
    log = Context.current().log;
  } catch {
    log = silentLogger;
  }
  log[level](message, meta);
}
