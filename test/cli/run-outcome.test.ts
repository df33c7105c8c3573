import { describe, expect, it } from 'vitest';
import { checkModelsOf, ModelUnavailableError } from '../../src/cli/model-check';
import { rerunLine, runExit } from '../../src/cli/run-outcome';
import type { BatchProgress, RowState } from '../../src/model';

/** `run`'s words before and after a batch: the models against the catalog, the exit code, a re-run's line. */

const progress = (counts: Partial<Record<RowState, number>>, spentUsd = 0): BatchProgress =>
  ({
    batchId: 'b',
    status: 'completed',
    done: true,
    spentUsd,
    counts: {
      succeeded: 0,
      reused: 0,
      images_unsaved: 0,
      failed: 0,
      unknown: 0,
      cancelled: 0,
      not_run: 0,
      ...counts,
    },
  }) as BatchProgress;

describe('the models of a batch against the catalog', () => {
  const models = { 'flux-dev': { rows: 2, images: 2 }, 'flux-pro': { rows: 1, images: 1 } };

  it('a model the account lacks: an error naming it, its rows and the account list (a long one cut)', () => {
    const catalog = Array.from({ length: 15 }, (_, i) => ({ id: i === 0 ? 'flux-dev' : `m${i}` }));
    expect(() => checkModelsOf(models, { ok: true, models: catalog })).toThrow(ModelUnavailableError);
    expect(() => checkModelsOf(models, { ok: true, models: catalog })).toThrow(
      'model flux-pro (1 row) is not available to this account (its models: flux-dev, m1, m2, m3, m4, m5, m6, m7, ' +
        'm8, m9, m10, m11 and 3 more); fix the model column or --model; nothing was started',
    );
  });

  it('a catalog that could not be read blocks nothing: one line says the models were not checked', () => {
    expect(checkModelsOf(models, { ok: true })).toBe(
      "models not checked against the account's catalog: the service showed none the worker could read",
    );
    expect(checkModelsOf(models, { noAnswer: 'timed out' })).toBe(
      "models not checked against the account's catalog: no worker answered (timed out)",
    );
    expect(checkModelsOf(models, { ok: true, models: [{ id: 'flux-dev' }, { id: 'flux-pro' }] })).toBeUndefined();
  });

  it('a catalog with no model id the settings read (another field than IMAGEGEN_MODEL_ID_FIELDS) refuses nothing', () => {
    expect(checkModelsOf(models, { ok: true, models: [] })).toBe(
      "models not checked against the account's catalog: it lists no model id where the settings read them " +
        '(IMAGEGEN_MODEL_ID_FIELDS; imagebatch doctor finds them)',
    );
  });
});

describe('the exit code of a followed batch', () => {
  it.each([
    [{ succeeded: 3 }, false, 0],
    [{ succeeded: 2, reused: 1 }, false, 0],
    [{ succeeded: 2, failed: 1 }, false, 1],
    [{ succeeded: 2, unknown: 1 }, false, 1],
    [{ succeeded: 2, images_unsaved: 1 }, false, 1],
    [{ succeeded: 2, cancelled: 1 }, false, 1],
    [{ succeeded: 2, not_run: 1 }, false, 1],
    [{ succeeded: 2, failed: 1, unknown: 1 }, true, 0],
    [{ failed: 2 }, true, 1],
    [{ failed: 2 }, false, 1],
    [{}, false, 0],
  ] as const)('%j, --allow-partial %s: exit %i', (counts, allowPartial, code) => {
    expect(runExit(progress(counts), allowPartial).code).toBe(code);
  });

  it('says why it exits 1, and what --allow-partial would do', () => {
    expect(runExit(progress({ succeeded: 1, failed: 1, unknown: 2 }), false).line).toBe(
      'batch b: 3 rows without images (1 failed, 2 unknown): exit 1 (--allow-partial exits 0 when some rows succeeded)',
    );
    expect(runExit(progress({ failed: 2 }), true).line).toBe('batch b: no row succeeded (2 failed): exit 1');
  });
});

describe('a batch run again', () => {
  it('nothing new sent: what was paid earlier', () => {
    expect(rerunLine(progress({ succeeded: 19 }, 0.76), 19, { keys: 0, rows: 0, paidUsd: 0 })).toBe(
      'batch b is complete: 19 rows, nothing new sent ($0.76 paid earlier)',
    );
  });

  it('partly new: how many rows, paid now and earlier', () => {
    expect(rerunLine(progress({ succeeded: 19 }, 0.76), 19, { keys: 6, rows: 5, paidUsd: 0.2 })).toBe(
      'batch b is complete: 19 rows, 5 new ($0.20 paid now), $0.56 paid earlier',
    );
    expect(rerunLine(progress({ succeeded: 1, reused: 3 }, 0.04), 4, { keys: 1, rows: 1, paidUsd: 0.04 })).toBe(
      'batch b is complete: 4 rows, 1 new ($0.04 paid now), 3 reused (paid before)',
    );
  });
});
