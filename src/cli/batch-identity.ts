import { canonicalSha256, type BatchAsks, type BatchEvent, type FileFingerprint, type LedgerStore } from '../ledger';
import { ErrorCode, ImagebatchError } from '../model/errors';
import type { BatchWorkflowInput } from '../workflows';

/**
 * A batch is what it asks: its file's fingerprint and its options, recorded with its id. The same id over other
 * content is refused; a file's name over other content makes a batch of its own.
 */

/**
 * A batch id already ran on other content: another file (its size and SHA-256 differ), or other options (model,
 * columns, new images). Nothing was started: rows are known by their ids, so the same id over other content would
 * count the old rows' results as the new rows', and relabel them.
 */
export class BatchFileChangedError extends ImagebatchError {
  readonly code = ErrorCode.BatchFileChanged;
  constructor(
    readonly batchId: string,
    readonly file: string,
    /** What differs, for a person: the file's fingerprints, or the options. */
    readonly difference: string,
    /** Where the batch's content was found: Temporal's memo of the batch, or the ledger store. */
    readonly recordedIn: string,
  ) {
    super(
      `batch ${batchId} was started on other content: ${difference} (recorded in ${recordedIn}); run it under a ` +
        'new --batch-id (requests paid before are reused, not paid again), or restore the file and options',
    );
  }
}

/**
 * The batch file holds rows of a batch that is still open (running, or paused): its errors.csv, written while it ran.
 * That batch starts its rows not started yet itself; run the file once it has ended. Nothing was started.
 */
export class BatchSourceOpenError extends ImagebatchError {
  readonly code = ErrorCode.BatchSourceOpen;
  constructor(
    readonly file: string,
    readonly source: string,
  ) {
    super(
      `${file} holds rows of batch ${source}, which is still open (running or paused) and starts its rows not ` +
        `started yet itself: run the file once that batch has ended (imagebatch status ${source})`,
    );
  }
}

export const describeFingerprint = (fp: FileFingerprint) => `${fp.size} bytes, sha256 ${fp.sha256.slice(0, 12)}`;

export const sameFingerprint = (a: FileFingerprint, b: FileFingerprint) => a.size === b.size && a.sha256 === b.sha256;

/** What a batch asks besides its file, as the store records it. */
export function batchAsks(input: BatchWorkflowInput): BatchAsks {
  return {
    ...(input.defaultModel ? { defaultModel: input.defaultModel } : {}),
    ...(input.userColumns && (input.userColumns.carry?.length || Object.keys(input.userColumns.send ?? {}).length)
      ? { userColumns: input.userColumns }
      : {}),
    ...(input.ledger?.newImages ? { newImages: true } : {}),
  };
}

const asksPrint = (asks: BatchAsks) =>
  canonicalSha256({ defaultModel: asks.defaultModel, userColumns: asks.userColumns, newImages: asks.newImages });

/** The options of `asks` for a person: `--model flux-dev, --new-images`. */
function describeAsks(asks: BatchAsks): string {
  const parts = [
    asks.defaultModel ? `--model ${asks.defaultModel}` : 'no --model',
    ...(asks.userColumns?.carry ?? []).map((c) => `--carry ${c}`),
    ...Object.entries(asks.userColumns?.send ?? {}).map(([c, f]) => `--column ${c}=${f}`),
    ...(asks.newImages ? ['--new-images'] : []),
  ];
  return parts.join(', ');
}

/** How a recorded start differs from this one, or undefined when it asked the same. */
export function contentDifference(
  recorded: BatchEvent,
  fingerprint: FileFingerprint,
  asks: BatchAsks,
): string | undefined {
  if (!sameFingerprint(recorded.fingerprint, fingerprint)) {
    return `its file was ${describeFingerprint(recorded.fingerprint)}, and it is now ${describeFingerprint(fingerprint)}`;
  }
  if (asksPrint(recorded) !== asksPrint(asks)) {
    return `it asked ${describeAsks(recorded)}, and this asks ${describeAsks(asks)}`;
  }
  return undefined;
}

/**
 * The batch id of a file run without `--batch-id`: the file's name, or, when the store holds a batch of that name
 * over other content, the name and a short digest of the content (file and options), so that another `--model` or
 * an edited file is a batch of its own, never the old one's.
 */
export async function defaultBatchId(
  store: LedgerStore,
  name: string,
  fingerprint: FileFingerprint,
  asks: BatchAsks,
): Promise<string> {
  const recorded = await store.batches(name);
  if (recorded.every((e) => contentDifference(e, fingerprint, asks) === undefined)) return name;
  const digest = canonicalSha256({ file: fingerprint, asks: asksPrint(asks) }).slice(0, 8);
  return `${name.slice(0, 128 - digest.length - 1)}-${digest}`;
}
