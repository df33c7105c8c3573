import { describe, expect, it } from 'vitest';
import { demoSummary, resultFilesSummary, type DemoResult } from '../../src/cli/commands/demo';
import type { BatchProgress } from '../../src/model';
import { spendText } from '../../src/cli/progress-line';
import type { WrittenResults } from '../../src/results';

/** The lines the demo (and `imagebatch results`) print about errors.csv and unresolved.csv, from the counts. */

function written(fields: Partial<WrittenResults>): WrittenResults {
  return {
    resultsCsv: '/out/results.csv',
    resultsJsonl: '/out/results.jsonl',
    errorsCsv: '/out/errors.csv',
    unresolvedCsv: '/out/unresolved.csv',
    gallery: '/out/index.html',
    open: false,
    rows: 50,
    errorRows: 0,
    errorAdvice: { submit_again: 0, revise_prompt: 0, fix_row: 0 },
    unresolvedRows: 0,
    imagesShortRows: 0,
    ...fields,
  };
}

describe('resultFilesSummary', () => {
  it('offers no command to run while the batch is open: its rows not started yet are its own', () => {
    const lines = resultFilesSummary(
      'demo',
      written({ open: true, errorRows: 2, errorAdvice: { submit_again: 2, revise_prompt: 0, fix_row: 0 } }),
    );
    expect(lines).toEqual([
      'errors.csv: 2 rows ended with nothing paid (/out/errors.csv); batch demo is still open: run the file once ' +
        'it has ended (imagebatch status demo)',
    ]);
    expect(lines.join('\n')).not.toContain('imagebatch run');
  });

  it('says how many rows of errors.csv to submit again, to revise and to fix, and how to run it', () => {
    const lines = resultFilesSummary(
      'demo',
      written({ errorRows: 6, errorAdvice: { submit_again: 3, revise_prompt: 2, fix_row: 1 } }),
    );
    expect(lines).toEqual([
      'errors.csv: 3 rows to submit again as they are (imagebatch run /out/errors.csv --batch-id demo-retry), ' +
        '2 to revise (safety filter), 1 to fix (rejected): edit or delete those 3 first',
    ]);
  });

  it('names unresolved.csv only when it has rows, with the command that resolves them', () => {
    const lines = resultFilesSummary(
      'demo',
      written({ errorRows: 1, errorAdvice: { submit_again: 1, revise_prompt: 0, fix_row: 0 }, unresolvedRows: 2 }),
    );
    expect(lines).toEqual([
      'errors.csv: 1 row to submit again as it is (imagebatch run /out/errors.csv --batch-id demo-retry)',
      'unresolved.csv: 2 rows may have been paid: imagebatch reconcile demo resolves them; never submit them again ' +
        '(/out/unresolved.csv)',
    ]);
  });

  it('an errors.csv with nothing to submit again as it is, and an empty one', () => {
    expect(
      resultFilesSummary(
        'b',
        written({ errorRows: 1, errorAdvice: { submit_again: 0, revise_prompt: 1, fix_row: 0 }, unresolvedRows: 1 }),
      ),
    ).toEqual([
      // Nothing to submit as it is: no command that would only fail again.
      'errors.csv: no rows to submit again as they are; 1 to revise (safety filter), 0 to fix (rejected): ' +
        'edit or delete that one first (/out/errors.csv)',
      'unresolved.csv: 1 row may have been paid: imagebatch reconcile b resolves it; never submit it again ' +
        '(/out/unresolved.csv)',
    ]);
    expect(resultFilesSummary('b', written({}))).toEqual(['errors.csv: no rows to submit again (/out/errors.csv)']);
  });

  it('says how many succeeded rows saved fewer images than they asked for, and where to see it', () => {
    expect(resultFilesSummary('b', written({ imagesShortRows: 2 }))).toEqual([
      'errors.csv: no rows to submit again (/out/errors.csv)',
      'results.csv: 2 rows succeeded with fewer images than num_images asked for (column images_short: how many ' +
        'are missing) (/out/results.csv)',
    ]);
  });
});

describe('spendText: a figure only where it is known', () => {
  it('all known', () => {
    expect(spendText({ spentUsd: 1.5, unknownSpendRows: 0 })).toBe('spent $1.50');
  });
  it('some rows of unknown price: at least, plus how many', () => {
    expect(spendText({ spentUsd: 0.08, unknownSpendRows: 3, unpricedInFlight: 2 })).toBe(
      'spent at least $0.08, plus 3 rows of unknown price, 2 in flight of unknown price',
    );
  });
  it('with a cap: reserved and left', () => {
    expect(spendText({ spentUsd: 0.4, unknownSpendRows: 0, reservedUsd: 0.12, spendCapUsd: 1, leftUsd: 0.48 })).toBe(
      'spent $0.40, reserved $0.12, $0.48 left of the $1.00 cap',
    );
  });
});

describe("the demo's summary: only what works once it has ended", () => {
  const progress = {
    batchId: 'demo',
    status: 'completed',
    counts: { succeeded: 3, reused: 0, images_unsaved: 0, failed: 0, unknown: 0, cancelled: 0, not_run: 0 },
    spentUsd: 0.12,
    refundedUsd: 0,
    unknownSpendRows: 0,
  } as unknown as BatchProgress;
  const res: DemoResult = {
    batchId: 'demo',
    temporalAddress: '127.0.0.1:7233',
    webUi: 'http://127.0.0.1:8233/namespaces/default/workflows',
    progress,
    results: written({ rows: 3 }),
    galleryUrl: 'file:///out/index.html',
    resumed: false,
  };

  it('no Web UI link: the server stopped with the demo', () => {
    const lines = demoSummary(res, '/home/logs');
    expect(lines.join('\n')).not.toMatch(/Web UI|8233/);
    expect(lines).toEqual([
      expect.stringMatching(/^Batch "demo" completed: 3 succeeded, /),
      'Gallery:  file:///out/index.html',
      'Results:  /out/results.csv',
      '          /out/results.jsonl',
      'errors.csv: no rows to submit again (/out/errors.csv)',
      "Logs:     /home/logs (worker.log: the worker's retries and warnings; dev-server.log)",
    ]);
  });
});
