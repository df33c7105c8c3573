import type { RowRecord } from '../../src/model';

/**
 * A row's record for tests that build one by hand: nothing sent, nothing charged, not resubmittable, unless `fields`
 * say otherwise. The prompt is `prompt <rowId>` and the model `flux-dev` when not given.
 */
export function rowRecord(fields: Partial<RowRecord> & Pick<RowRecord, 'batchId' | 'rowId' | 'state'>): RowRecord {
  return {
    prompt: `prompt ${fields.rowId}`,
    model: 'flux-dev',
    keys: [],
    creationIds: [],
    images: [],
    chargedUsd: 0,
    refundedUsd: 0,
    netUsd: 0,
    resubmittable: false,
    ...fields,
  };
}
