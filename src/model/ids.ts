/**
 * Deterministic identifiers. Pure functions with no imports, used by workflows (replay-safe), the CLI and
 * tests alike: the same batch, row and attempt always give the same idempotency key, across crashes, replays
 * and re-runs of the same file, so a retry can never be charged as a new request.
 */

/**
 * Batch and schedule ids: they become parts of workflow ids, idempotency keys and folder names, so never only dots.
 */
export const ID_PATTERN = /^(?!\.+$)[A-Za-z0-9._:-]{1,128}$/;

/** A device name Windows reserves (any case, with or without an extension), or a name ending in a dot. */
const WINDOWS_UNSAFE = /^(?:con|prn|aux|nul|com[1-9]|lpt[1-9])(?:\..*)?$|[. ]$/i;

/**
 * Why `id` (matching {@link ID_PATTERN}) cannot name a file on Windows, or undefined when it can. `:` is allowed:
 * file names take ids through a `safeSegment` that replaces it.
 */
export function windowsIdProblem(id: string): string | undefined {
  return WINDOWS_UNSAFE.test(id)
    ? 'must not be a name Windows reserves (CON, PRN, AUX, NUL, COM1-9, LPT1-9, with or without an extension) or end in a dot'
    : undefined;
}

/** Workflow id of a batch. */
export function batchWorkflowId(batchId: string): string {
  return `batch/${batchId}`;
}

/**
 * The longest workflow id (and idempotency key) imagebatch makes: SQL stores of Temporal keep workflow ids in
 * VARCHAR(255) (PostgreSQL refuses a longer one), and contract-defaults.md bounds a key to 255 printable characters. The cluster's
 * dynamic config sets `limit.maxIDLength` to it (deploy/dynamicconfig/imagebatch.yaml).
 */
export const MAX_ID_LENGTH = 255;

/**
 * Workflow id of one row of a batch: `<batch>/<row>`. When batch and row ids (128 characters each at most) are too
 * long together for {@link MAX_ID_LENGTH}, the batch id is cut and followed by `~` and its digest (ids never contain
 * `~`): `<start of batch>~<digest>/<row>`. Readable, and one-to-one: the row id is whole, the batch's digest differs.
 */
export function promptWorkflowId(batchId: string, rowId: string): string {
  const id = `${batchId}/${rowId}`;
  if (id.length <= MAX_ID_LENGTH) return id;
  const digest = fnv1a64Hex(batchId);
  return `${batchId.slice(0, MAX_ID_LENGTH - rowId.length - digest.length - 2)}~${digest}/${rowId}`;
}

/** Row workflow ids of batches started before {@link promptWorkflowId} kept to 255: replays only. */
export function legacyPromptWorkflowId(batchId: string, rowId: string): string {
  return `${batchId}/${rowId}`;
}

const MAX_KEY_LENGTH = MAX_ID_LENGTH;

/**
 * The idempotency key of one attempt of one row: `ib/<batch>/<row>/a<attempt>`. One-to-one: ids never contain `/`,
 * so the parts read back unambiguously and no two rows share a key. When batch and row ids are both long enough to
 * pass the 255 printable characters of contract-defaults.md, the batch id is replaced by `~` and a digest of it (ids never start
 * with `~`): the keys of one batch stay one-to-one by construction, those of two batches differ by the digest.
 */
export function idempotencyKeyFor(batchId: string, rowId: string, attempt: number): string {
  const key = `ib/${batchId}/${rowId}/a${attempt}`;
  return key.length <= MAX_KEY_LENGTH ? key : `ib/~${fnv1a64Hex(batchId)}/${rowId}/a${attempt}`;
}

/**
 * The keys of rows started before keys were one-to-one (`ib.<batch>.<row>.a<attempt>`): `a.b`,`c` and `a`,`b.c`
 * share one. Only replays of those rows use it (see ONE_TO_ONE_KEYS_AND_LEDGER in prompt-workflow.ts).
 */
export function legacyIdempotencyKeyFor(batchId: string, rowId: string, attempt: number): string {
  const key = `ib.${batchId}.${rowId}.a${attempt}`;
  if (key.length <= MAX_KEY_LENGTH) return key;
  const digest = fnv1a64Hex(key);
  return `${key.slice(0, MAX_KEY_LENGTH - digest.length - 1)}~${digest}`;
}

/** FNV-1a, 64 bits, as 16 hex digits: a stable digest with no dependency (workflow code has no crypto). */
export function fnv1a64Hex(text: string): string {
  let hash = 0xcbf29ce484222325n;
  const prime = 0x100000001b3n;
  for (let i = 0; i < text.length; i++) {
    hash ^= BigInt(text.charCodeAt(i));
    hash = (hash * prime) & 0xffffffffffffffffn;
  }
  return hash.toString(16).padStart(16, '0');
}

/**
 * The batch, row and attempt a key of {@link idempotencyKeyFor} names; undefined for any other string. A key whose
 * batch id was replaced by its digest gives `batchId` as `~<digest>`.
 */
export function parseIdempotencyKey(key: string): { batchId: string; rowId: string; attempt: number } | undefined {
  const m = /^ib\/([^/]+)\/([^/]+)\/a(\d+)$/.exec(key);
  if (!m) return undefined;
  return { batchId: m[1]!, rowId: m[2]!, attempt: Number(m[3]) };
}
