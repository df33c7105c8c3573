/**
 * A creation (the service's job) and what the activities say of it: the request a row sends, the images it
 * yields, its price, and the activity contract between workflows and the image-service activities. One activity
 * attempt sends at most one request to the service, so that Temporal's task-queue activity rate limit is the
 * per-key request rate across every worker, and waits between attempts (Retry-After, poll interval, backoff) are
 * activity retries with `nextRetryDelay`: durable, and adding no history events.
 */

import type { KeyCheck } from './key-check';
import type { BindingLimit } from './limits';

/** An earlier request with the same fingerprint that served a row instead of a key of its own. */
export interface ReusedFrom {
  batchId: string;
  rowId: string;
  idempotencyKey: string;
  /** Its creation, when the service gave one. */
  creationId?: string;
}

/** The body fields a row may carry (contract-defaults.md, "The submit body"). */
export interface CreationRequest {
  prompt: string;
  model: string;
  negative_prompt?: string;
  width?: number;
  height?: number;
  seed?: number;
  num_images?: number;
  /**
   * The row's own columns sent by `--column <column>=<field>`: body field (a name or dotted path) to the cell's value
   * (trimmed; an empty cell is left out). Placed after the request fields and the template, in sorted order, so the
   * body stays the same bytes (see `src/api/request-shape.ts`). Each value is at most `MAX_EXTRA_VALUE_CHARS`.
   * @default none
   */
  extra?: Record<string, string>;
}

export interface SubmitCreationInput {
  /** Deterministic: the same batch, row and attempt always give the same key. */
  idempotencyKey: string;
  request: CreationRequest;
}

export interface SubmitCreationResult {
  creationId: string;
  status: string;
  /** As far as the service reports it. */
  costUsd?: number;
  /** True when the service replayed an earlier acceptance (nothing charged again), if it can be told. */
  replayed?: boolean;
}

export interface PollCreationInput {
  creationId: string;
}

export interface ImageRef {
  /** An http(s) URL to download, or an inline image as a `data:<type>;base64,...` URI (saved without a request). */
  url: string;
  width?: number;
  height?: number;
  /** Where in the creation record the image was found (e.g. `images[0].url`, `data[0].b64_json`). */
  source?: string;
  /**
   * Found by discovery, not at a configured image path: a URL that may be no image (an API link, a webhook, a web
   * page). Its download keeps it only when its bytes are an image, and drops it otherwise instead of failing.
   */
  candidate?: true;
}

/** A creation that has ended. In-flight creations never come back: the activity retries until they end. */
export type PollCreationResult =
  | {
      outcome: 'succeeded';
      status: string;
      costUsd?: number;
      images: ImageRef[];
      /**
       * The record's top-level field names (never their values), bounded by `recordKeysOf` (src/api/record-keys.ts):
       * what a message about a success without an image can name.
       */
      recordKeys?: string[];
    }
  | { outcome: 'failed'; status: string; costUsd?: number; error: string; retryable: boolean };

export interface DownloadImagesInput {
  batchId: string;
  rowId: string;
  creationId: string;
  images: ImageRef[];
  /** Output folder of the batch (the worker's own folder when relative). */
  outDir: string;
}

export interface DownloadedImage {
  /**
   * The URL it was downloaded from; for an inline image, a short description instead of its data (e.g.
   * `data:image/png;base64 (12345 bytes) at data[0].b64_json`): results go into Temporal history.
   */
  url: string;
  /** Where in the creation record the image was found (as the poll said), when known. */
  source?: string;
  /** Path of the file, relative to the batch's output folder. */
  path: string;
  sha256: string;
  bytes: number;
}

/**
 * Where a key's charge was learned: the creation said what it cost; else the catalog's price for the model; else a
 * price the user gave (`--price`). None of them: the charge is unknown.
 */
export const PriceSource = { Creation: 'creation', Catalog: 'catalog', User: 'user' } as const;
export type PriceSource = (typeof PriceSource)[keyof typeof PriceSource];

/** A request's price known before it is sent (price per image times images), and where it came from. */
export interface ListPrice {
  usd: number;
  source: typeof PriceSource.Catalog | typeof PriceSource.User;
}

export interface ModelInfo {
  id: string;
  name?: string;
  priceUsd?: number;
}

/**
 * One idempotency key of a row, from submission to saved images, in one activity: every attempt sends at most one
 * request to the service (the submission while no creation is known, then one poll), and what an attempt learned
 * (the creation id, when it was accepted, the last poll) goes to the next attempt in heartbeat details. A row's
 * happy path is one activity, so a row of a batch reports its end itself in a few history events (docs/design.md,
 * "A row's history").
 */
export interface CreateImageInput {
  /** Deterministic: the same batch, row and attempt always give the same key. */
  idempotencyKey: string;
  request: CreationRequest;
  batchId: string;
  rowId: string;
  /** Output folder of the batch (the worker's own folder when relative). */
  outDir: string;
  /** Longest wait for the creation to end after its acceptance; then the activity fails with `MaxWait`. */
  maxPollWaitMs: number;
  /**
   * What an earlier activity learned of this key (the row waited out a batch-level stop in between): a known
   * creation is polled, never submitted again.
   */
  progress?: KeyProgress;
  /** The ledger store the row's batch was started on, and whether it asks for new images. @default none */
  ledger?: LedgerScope;
  /**
   * Prove the key: once its first submission is answered 202, the next attempt sends the same key and body again
   * instead of the first poll; the same creation must come back (KeyProgress.keyCheck). @default false
   */
  proveKey?: true;
}

/** What a batch tells its rows of the ledger store (src/ledger): plain JSON, it travels in workflow inputs. */
export interface LedgerScope {
  /** The id of the store the batch was recorded in: a worker whose store has another id sends nothing for it. */
  storeId?: string;
  /** Where that store was, as the command that started the batch named it (a URL without its password). */
  storeLocation?: string;
  /** How many keys that store had recorded when the batch started: which of two stores knows more. */
  storeKeys?: number;
  /**
   * New images even for requests paid before (`--new-images`, and every run of a schedule): no earlier request
   * serves a row of the batch.
   * @default false
   */
  newImages?: boolean;
}

/**
 * What the attempts of {@link CreateImageInput} learned of their key: heartbeat details from attempt to attempt, and
 * the second element of the details of every failure the activity ends with, so the row's record keeps it.
 */
export interface KeyProgress {
  creationId?: string;
  /** Worker time of the acceptance (ms). */
  acceptedAtMs?: number;
  /** What the acceptance said the creation costs (USD), if it said. */
  costUsd?: number;
  /** Worker time of the last poll sent (ms): the next goes out no sooner than the minimum interval after it. */
  lastPollAtMs?: number;
  /** Consecutive answers with no known outcome (no response, 500, malformed), and sends that never left. */
  ambiguousTries?: number;
  /** A send of the key got no answer that can be read: it may have reached the service, so it is never `not_sent`. */
  mayBeSent?: true;
  /** Consecutive poll answers 404 without the service's ERR_NOT_FOUND code. */
  unrecognizedNotFound?: number;
  /** The creation succeeded: what is left is saving its images. */
  generated?: true;
  /** The poll plan's choice at the acceptance: polled at the minimum interval and learnt from (see poll-plan.ts). */
  pollExplore?: boolean;
  /** Worker time (ms) the row began to wait for the earlier request that serves it, still in flight elsewhere. */
  reuseWaitSinceMs?: number;
  /** Status words in no set whose record was judged by its bytes, once each (see {@link StatusCheck}). */
  statusChecks?: StatusCheck[];
  /**
   * Polls of the key's own creation answered 404 ERR_NOT_FOUND and waited out as reads that lag writes (see
   * `IMAGEGEN_NOT_FOUND_WINDOW_MS`), over every run of them: the row's record counts them.
   */
  notFoundPolls?: number;
  /** Worker time (ms) of the first 404 of the current run of them; any answer that shows the creation ends the run. */
  notFoundSinceMs?: number;
  /** 404s in the current run: the backoff before the next poll grows with them. */
  notFoundRun?: number;
  /** The check of the key sent a second time, once it ended (CreateImageInput.proveKey). */
  keyCheck?: KeyCheck;
  /** The key sent again once its creation was not found for a whole window (IMAGEGEN_NOT_FOUND_WINDOW_MS). */
  notFoundReplay?: NotFoundReplay;
}

/**
 * What the record of a creation whose status is in no set (success, failed, in flight) held, judged once per status
 * word by the bytes of its URLs (src/activities/create-image/status-check.ts).
 */
export interface StatusCheck {
  /** The status word, trimmed and lower case. */
  status: string;
  /** The image it held: where in the record, and its media type by its bytes. */
  image?: { at: string; type: string };
  /** Why nothing it held was an image, when something sat at a configured image path (there: `atImagePath`). */
  why?: string;
  atImagePath?: string;
  /** A digest of where its URLs sat: the same word on a record read otherwise (new settings) is judged again. */
  of?: string;
  /** A URL gave no answer (a reset, a timeout, a 5xx): no verdict yet, so the word is judged again at a later poll. */
  unsettled?: true;
  /** How many times the word was judged (absent: once). */
  judged?: number;
}

/**
 * The key of a creation not found for a whole window of reads that lag writes, sent again once: due, or what came
 * back. Its own creation: the service still holds it (polled on, in a new window). Another: the service did not keep
 * the key (that creation was charged).
 */
export interface NotFoundReplay {
  state: 'due' | 'same' | 'other';
  /** What was tried before it, for messages: `answered 404 ERR_NOT_FOUND for 90 s (14 polls)`. */
  tried: string;
  /** `other`: the creation the key made anew, and its cost when the 202 showed it. */
  creationId?: string;
  costUsd?: number;
  /** `other`: what happened, in words (the batch stop's). */
  message?: string;
}

/**
 * How a key ended when its creation ended, or, `reused`, how the earlier request of the same fingerprint that served
 * the row instead (nothing was sent for the key): its images saved here, or none and why. Every other end is an
 * ApplicationFailure (FailureType).
 */
export type CreateImageResult = (
  | { outcome: 'succeeded'; creationId: string; costUsd?: number; images: DownloadedImage[] }
  | { outcome: 'failed'; creationId: string; costUsd?: number; error: string; retryable: boolean }
  | {
      outcome: 'reused';
      reusedFrom: ReusedFrom;
      images: DownloadedImage[];
      /** Why there are no images. */
      error?: string;
      /** Its creation succeeded (paid), but its images could not be saved here. */
      generated?: boolean;
    }
) & {
  /** The limit that bound the worker's requests when the key ended (see {@link BindingLimit}). */
  limit?: BindingLimit;
  /** The service itself answered a 429 lately (not one of the worker's probes): news of a limit, not a queue. */
  refused?: true;
  /** The key's lagging 404s (see {@link KeyProgress.notFoundPolls}), when there were any. */
  notFoundPolls?: number;
  /** The check of the key sent a second time, when one was made (see {@link KeyProgress.keyCheck}). */
  keyCheck?: KeyCheck;
};
