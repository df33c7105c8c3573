import { FAILED_STATUS } from './contract';
import { readUsd } from './money';
import { valuesAt } from './record-path';
import { DISCOVERED_SOURCE_SUFFIX, imagesOf, parseCreation, type CreationFields } from './schemas';

/**
 * Where a creation record carries what imagebatch reads (its wrapper, id, status, error, cost and images), at the
 * configured paths or, failing those, under common names. For `doctor --spend-one`, which shows the findings and
 * the settings they call for; runs read the configured paths only. Pure: locations and names, never a value but
 * the status word and the cost.
 */

/** How a record is read: the settings of the same names. */
export interface RecordReading extends CreationFields {
  imageFields: readonly string[];
  costFields: readonly string[];
  /** Lower case. */
  successStatuses: readonly string[];
  /** `IMAGEGEN_MAX_DOWNLOAD_BYTES`. */
  maxInlineBytes?: number;
}

/** Where a field was found: `at` is its location in the record (inside its wrapper). */
export interface FieldFinding {
  at: string;
  /** Found at a configured path; false when found under a common name only. */
  configured: boolean;
}

/** What a status word means to the configured settings. */
export const StatusMeaning = { Success: 'success', Failed: 'failed', InFlight: 'in flight' } as const;
export type StatusMeaning = (typeof StatusMeaning)[keyof typeof StatusMeaning];

export interface RecordFindings {
  /** The wrapper the record sits in, if any. */
  wrapper?: 'data' | 'creation';
  id?: FieldFinding;
  status?: FieldFinding & { word: string; meaning: StatusMeaning };
  error?: FieldFinding;
  cost?: FieldFinding & { usd: number };
  /** Where the images were found (`images[0].url`), the first few; `configured` false when discovered. */
  images: { count: number; at: string[]; configured: boolean };
}

/** Common names of a record's id, status, error and cost, tried when the configured paths find none. */
export const COMMON_RECORD_FIELDS = {
  id: ['id', 'uuid', 'job_id', 'jobId', 'creation_id', 'request_id', 'task_id', 'prediction_id'],
  status: ['status', 'state', 'job_status', 'jobStatus', 'phase'],
  error: ['error', 'error_message', 'errorMessage', 'failure_reason', 'detail'],
  cost: ['amount', 'total_cost', 'total', 'fee', 'billing', 'billing.cost', 'billing.amount', 'usage.cost', 'payment'],
} as const;

/** Image locations shown at most. */
const IMAGE_LOCATIONS_SHOWN = 4;
/** The longest status word shown. */
const MAX_STATUS_WORD = 64;

/** Where `body`'s creation record carries its fields; undefined when no record with an id or a status is found. */
export function findRecordFields(body: unknown, reading: RecordReading): RecordFindings | undefined {
  const guessing: CreationFields = {
    idFields: [...reading.idFields, ...COMMON_RECORD_FIELDS.id],
    statusFields: [...reading.statusFields, ...COMMON_RECORD_FIELDS.status],
    errorFields: [...reading.errorFields, ...COMMON_RECORD_FIELDS.error],
  };
  const record = parseCreation(body, reading) ?? parseCreation(body, guessing);
  if (record === undefined) return undefined;
  const fields = record.fields;
  const out: RecordFindings = { images: { count: 0, at: [], configured: true } };
  if (fields !== body && body !== null && typeof body === 'object') {
    out.wrapper = (body as Record<string, unknown>).data === fields ? 'data' : 'creation';
  }
  const isId = (v: unknown) => (typeof v === 'string' && v !== '') || typeof v === 'number';
  const id = locate(fields, reading.idFields, COMMON_RECORD_FIELDS.id, isId);
  if (id) out.id = id.found;
  const status = locate(fields, reading.statusFields, COMMON_RECORD_FIELDS.status, (v) => typeof v === 'string');
  if (status) {
    const word = String(status.value).slice(0, MAX_STATUS_WORD);
    const normal = word.trim().toLowerCase();
    const meaning =
      normal === FAILED_STATUS
        ? StatusMeaning.Failed
        : reading.successStatuses.some((s) => s.toLowerCase() === normal)
          ? StatusMeaning.Success
          : StatusMeaning.InFlight;
    out.status = { ...status.found, word, meaning };
    if (meaning === StatusMeaning.Failed) {
      const error = locate(fields, reading.errorFields, COMMON_RECORD_FIELDS.error, (v) => v !== null);
      if (error) out.error = error.found;
    }
  }
  const costAt = (paths: readonly string[], configured: boolean) => {
    for (const p of paths) {
      const usd = readUsd(fields, [p]);
      const where = usd === undefined ? undefined : valuesAt(fields, p).next();
      if (usd !== undefined && where && !where.done) return { at: where.value.at, configured, usd };
    }
    return undefined;
  };
  const cost = costAt(reading.costFields, true) ?? costAt(COMMON_RECORD_FIELDS.cost, false);
  if (cost) out.cost = cost;
  const images = imagesOf(record, {
    imageFields: reading.imageFields,
    ...(reading.maxInlineBytes === undefined ? {} : { maxInlineBytes: reading.maxInlineBytes }),
  });
  const sources = images.map((i) => i.source ?? '');
  out.images = {
    count: images.length,
    at: sources.slice(0, IMAGE_LOCATIONS_SHOWN).map((s) => s.replace(DISCOVERED_SOURCE_SUFFIX, '')),
    configured: !sources.some((s) => s.endsWith(DISCOVERED_SOURCE_SUFFIX)),
  };
  return out;
}

/** The first value that `take` accepts at a configured path, else at a common name. */
function locate(
  record: unknown,
  configured: readonly string[],
  common: readonly string[],
  take: (v: unknown) => boolean,
): { found: FieldFinding; value: unknown } | undefined {
  for (const [paths, isConfigured] of [
    [configured, true],
    [common, false],
  ] as const) {
    for (const p of paths) {
      for (const { value, at } of valuesAt(record, p)) {
        if (take(value)) return { found: { at, configured: isConfigured }, value };
      }
    }
  }
  return undefined;
}

/** A location as a path for the settings: every element index made `[]` (`result.files[0].href` -> `result.files[].href`). */
export function pathOfLocation(at: string): string {
  return at.replace(/\[\d+\]/g, '[]');
}
