import type { Dispatcher } from 'undici';
import type { ApiKeyProvider } from '../api/api-key';
import type { ImageRef, ModelInfo, PollCreationResult, StatusCheck } from '../model';
import type { RecordFindings } from '../api/record-findings';
import type { ServiceConfig } from '../api/service-config';
import type { UnjudgedRecord } from '../api/unrecognised-status';

/** The data of `imagebatch doctor`'s report (see `../doctor.ts`): what each check found, never a thrown error. */

/** What a check found: `FAIL` would break a batch; `warn` and `guess` would not. */
export const CheckResult = {
  Ok: 'ok',
  Warn: 'warn',
  Guess: 'guess',
  Fail: 'FAIL',
  Skipped: 'skipped',
} as const;
export type CheckResult = (typeof CheckResult)[keyof typeof CheckResult];

export interface DoctorCheck {
  /** Short name: `api key`, `base URL`, `authentication`, ... */
  name: string;
  result: CheckResult;
  /** What was found (or guessed), in one line. */
  found: string;
  /** What to do about it, when something is to be done. */
  hint?: string;
  /** The user's input is wrong (a model the account lacks): nothing was submitted. */
  invalidInput?: true;
  /**
   * A failure that only a real creation can settle (the creation path, when a made-up id and a made-up endpoint are
   * answered alike): `--spend-one` still runs, and its poll turns the check ok, or leaves it failed.
   */
  spendOneSettles?: true;
  /**
   * The catalog could not be read or understood (no list, no model id, no catalog at the path): a batch would fail,
   * but `--spend-one --model` still runs, since its record shows the rest.
   */
  catalogShape?: true;
}

/** A setting doctor found the service needs, ready to write: `IMAGEGEN_IMAGE_FIELDS='result.files[].href'`. */
export interface SettingToWrite {
  /** The environment variable. */
  variable: string;
  /** Its value: locations, field names and status words only, never a URL, a prompt or the key. */
  value: string;
  /** Why, in a few words. */
  why: string;
}

/** The paid test of `doctor --spend-one`. */
export interface SpendOneOptions {
  model: string;
  /** Names the test: the idempotency key is `imagebatch-doctor/<testId>/<model>`. */
  testId: string;
  /** Folder of the record (`doctor-spend-one.json`) and the images; relative to the runner's output root. */
  outDir: string;
  /** Longest wait for the creation to end. */
  maxWaitMs: number;
}

export interface DoctorOptions {
  spendOne?: SpendOneOptions;
}

export interface SpendOneReport {
  idempotencyKey: string;
  creationId?: string;
  /** True when the creation came from the record of an earlier run: nothing was submitted. */
  fromRecord?: boolean;
  /** The service said the acceptance was a replay (nothing charged again), when it says so. */
  replayed?: boolean;
  /** The polled record's key paths (`images[].url`); never a value. */
  recordShape?: string[];
  /** Where the record's fields were found (locations and names only). */
  fields?: RecordFindings;
  outcome?: PollCreationResult['outcome'];
  status?: string;
  costUsd?: number;
  /** Images saved, as absolute paths on the machine that ran the checks. */
  saved?: string[];
}

export interface DoctorReport {
  /** Who ran the checks: `worker 1234@host` or `this process`. */
  ranOn: string;
  checks: DoctorCheck[];
  /** The models of the catalog, when it was read. */
  models?: ModelInfo[];
  spendOne?: SpendOneReport;
  /** Settings that differ from the configured ones, found by the checks (shown ready to paste). */
  settings?: SettingToWrite[];
}

/** How the paid test saves its images: the batches' own download, given by the activity or the command. */
export type SaveImages = (input: {
  creationId: string;
  images: ImageRef[];
  /** Resolved against `outputRoot`. */
  outDir: string;
  signal?: AbortSignal;
}) => Promise<{ path: string; bytes: number }[]>;

/** How the paid test judges a status in no set: the batches' own judge (src/activities/status-check.ts). */
export type JudgeStatus = (status: string, record: UnjudgedRecord, signal?: AbortSignal) => Promise<StatusCheck>;

export interface DoctorDeps {
  config: ServiceConfig;
  apiKey: ApiKeyProvider;
  /** @default a pool on the base URL's origin (closed at the end) */
  dispatcher?: Dispatcher;
  /** Saves a creation's images into `outDir` as a batch saves them (without the key, through the download guard). */
  saveImages: SaveImages;
  /**
   * Judges a record whose status is in no set by the bytes of its URLs, as a batch judges it (without the key,
   * through the download guard, nothing saved).
   * @default none: no URL is judged an image
   */
  judgeStatus?: JudgeStatus;
  /** Folder that a relative `outDir` is resolved against. */
  outputRoot: string;
  /** @default Date.now */
  now?: () => number;
  /** @default setTimeout, cut short by `signal` */
  sleep?: (ms: number) => Promise<void>;
  signal?: AbortSignal;
  /** @default 'this process' */
  ranOn?: string;
  /**
   * Records in the ledger store that a paid test saw the service understood under these settings (a batch then
   * skips its canary).
   * @default nothing is recorded
   */
  proveService?: (creationId: string) => Promise<void>;
}
