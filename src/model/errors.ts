/**
 * imagebatch's one error family. Every error of ours extends {@link ImagebatchError} and carries a stable
 * {@link ErrorCode}; callers check `instanceof` a class or compare `code`, never `name` or message text. Codes are
 * part of the interface (the CLI's `--json` output and logs carry them): add codes, never rename one.
 *
 * No dependencies: this file sits in the model layer, below every other.
 */
export const ErrorCode = {
  /** A setting (environment variable) cannot be used. */
  ConfigInvalid: 'CONFIG_INVALID',
  /** An `IMAGEGEN_*` or `IMAGEBATCH_*` variable is set that imagebatch does not know (a typo, another version's). */
  SettingUnknown: 'SETTING_UNKNOWN',
  /** The API key is missing, unreadable or malformed. */
  ApiKeyInvalid: 'API_KEY_INVALID',
  /** A command-line option or argument cannot be used. */
  OptionInvalid: 'OPTION_INVALID',
  /** `--price` or `--prices` cannot be used (a kind of OptionInvalid). */
  PriceOptionInvalid: 'PRICE_OPTION_INVALID',
  /** `--carry` or `--column` cannot be used (a kind of OptionInvalid). */
  ColumnOptionInvalid: 'COLUMN_OPTION_INVALID',
  /** The batch file has problems; nothing was started. */
  BatchInvalid: 'BATCH_INVALID',
  /** A batch id already ran on another file. */
  BatchFileChanged: 'BATCH_FILE_CHANGED',
  /** The batch file holds rows of a batch that is still open (its errors.csv, while it runs or is paused). */
  BatchSourceOpen: 'BATCH_SOURCE_OPEN',
  /** The batch file cannot be read, or changed between pages. */
  BatchFileUnreadable: 'BATCH_FILE_UNREADABLE',
  /** A batch did not answer in time. */
  BatchNoAnswer: 'BATCH_NO_ANSWER',
  /** The batch names a model the account's catalog does not list; nothing was started. */
  ModelUnavailable: 'MODEL_UNAVAILABLE',
  /** A price given (`--price`, `--prices`) is below what the ledger store saw the service charge for its model. */
  PriceBelowCharged: 'PRICE_BELOW_CHARGED',
  /** A price needed for a spend cap is not known. */
  PriceUnknown: 'PRICE_UNKNOWN',
  /** The request body cannot be built from the settings and the row. */
  RequestShapeInvalid: 'REQUEST_SHAPE_INVALID',
  /** A request to the service took longer than its bound. */
  RequestTimeout: 'REQUEST_TIMEOUT',
  /** An image address points where downloads are refused (loopback, private, link-local...). */
  DownloadAddressRefused: 'DOWNLOAD_ADDRESS_REFUSED',
  /** A payload was encrypted with a key whose id is not among the configured keys (an old key dropped too early). */
  PayloadKeyUnknown: 'PAYLOAD_KEY_UNKNOWN',
  /** A payload's authentication tag does not match: the payload (or its key id) was changed, or the key is wrong. */
  PayloadTampered: 'PAYLOAD_TAMPERED',
  /** Not a payload the codec wrote: no key id, or too short to hold a nonce and a tag. */
  PayloadMalformed: 'PAYLOAD_MALFORMED',
  /** The metrics exporter could not be set up. */
  MetricsSetup: 'METRICS_SETUP',
  /** The simulator's configuration cannot be used. */
  SimulatorConfigInvalid: 'SIMULATOR_CONFIG_INVALID',
  /** The codec server refuses a request: malformed, without the token, or to another host, path or method. */
  CodecRequestInvalid: 'CODEC_REQUEST_INVALID',
  /** The simulator's client went away before its request body was complete (the simulator answers nobody). */
  ClientGone: 'CLIENT_GONE',
  /** The CLI cannot reach Temporal at the address it was given (or the local server's). */
  TemporalUnreachable: 'TEMPORAL_UNREACHABLE',
  /** The local worker runs with other image-service settings than the command's shell. */
  LocalSettingsDiffer: 'LOCAL_SETTINGS_DIFFER',
  /** The local Temporal server or worker did not start. */
  LocalStartFailed: 'LOCAL_START_FAILED',
  /** The ledger store (`IMAGEBATCH_LEDGER`) cannot be opened, read or written. */
  LedgerUnavailable: 'LEDGER_UNAVAILABLE',
  /** A worker's ledger store is not the one its batch was started with: two memories of what was paid. */
  LedgerMismatch: 'LEDGER_MISMATCH',
  /** The ledger store this user used is missing, emptied or replaced where it was (or the default one moved). */
  LedgerReplaced: 'LEDGER_REPLACED',
  /** Before a batch starts, the worker found the service unusable: not reachable, or the key refused. */
  ServiceUnusable: 'SERVICE_UNUSABLE',
  /** A scheduled run cannot start: its file is missing, cannot be read, or has problems. */
  ScheduledRunCannotStart: 'SCHEDULED_RUN_CANNOT_START',
  /** A schedule's source is refused: a URL on an address downloads may not reach, or a path outside its folders. */
  ScheduleSourceRefused: 'SCHEDULE_SOURCE_REFUSED',
} as const;
export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

/** The base of every error imagebatch throws on purpose. `name` is the subclass's name, for logs only. */
export abstract class ImagebatchError extends Error {
  abstract readonly code: ErrorCode;
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** True for any error of ours with the given code. */
export function hasErrorCode(err: unknown, code: ErrorCode): err is ImagebatchError {
  return err instanceof ImagebatchError && err.code === code;
}
