import { afterAll, describe, expect, it } from 'vitest';
import { ProblemCode, readBatchPage, validateBatchFile } from '../../src/batch';
import { createBatchFileActivities } from '../../src/activities/batch-file';
import { ColumnOptionError, parseCarryOption, parseColumnOption, userColumnsInput } from '../../src/cli/columns';
import { tempDir } from './helpers';

const tmp = tempDir();
afterAll(() => tmp.cleanup());

const FILE = [
  'id,prompt,sku,model,campaign',
  'a,a red fox,SKU-1 ,sdxl, spring',
  'b,a blue bird,,sdxl,=SUM(1)',
  '',
].join('\n');

describe('columns the user owns', () => {
  it('fail without an option, naming the column, its header position and both options', async () => {
    const file = tmp.file('plain.csv', FILE);
    const report = await validateBatchFile(file);
    expect(report.ok).toBe(false);
    const unknown = report.problems.filter((p) => p.code === ProblemCode.HeaderUnknownColumn);
    expect(unknown.map((p) => [p.line, p.field])).toEqual([
      [1, 'sku'],
      [1, 'campaign'],
    ]);
    expect(unknown[0]!.message).toContain('unknown column "sku" (header column 3)');
    expect(unknown[0]!.message).toContain('--carry "sku"');
    expect(unknown[0]!.message).toContain('--column "sku"=<field>');
    expect(unknown[1]!.message).toContain('(header column 5)');
  });

  it('still fail for a column that is neither carried nor sent', async () => {
    const file = tmp.file('one.csv', FILE);
    const report = await validateBatchFile(file, { userColumns: { carry: ['sku'] } });
    expect(report.problems.map((p) => [p.code, p.field])).toEqual([[ProblemCode.HeaderUnknownColumn, 'campaign']]);
  });

  it('report an option naming a column the header lacks', async () => {
    const file = tmp.file('missing.csv', FILE);
    const report = await validateBatchFile(file, {
      userColumns: { carry: ['sku', 'campaign', 'colour'], send: { region: 'meta.region' } },
    });
    expect(report.problems.map((p) => [p.code, p.line, p.field, p.message])).toEqual([
      [
        ProblemCode.HeaderOptionColumnMissing,
        1,
        'colour',
        '--carry colour names the column "colour", which the header does not have',
      ],
      [
        ProblemCode.HeaderOptionColumnMissing,
        1,
        'region',
        '--column region=meta.region names the column "region", which the header does not have',
      ],
    ]);
  });

  it('carry cells untouched and send mapped cells (trimmed, empty left out) in the request', async () => {
    const file = tmp.file('ok.csv', FILE);
    const userColumns = { carry: ['campaign'], send: { sku: 'meta.sku' } };
    expect((await validateBatchFile(file, { userColumns })).ok).toBe(true);
    const page = await readBatchPage(file, undefined, { userColumns });
    expect(page.rows.map((r) => [r.rowId, r.request, r.columns])).toEqual([
      ['a', { prompt: 'a red fox', model: 'sdxl', extra: { 'meta.sku': 'SKU-1' } }, { campaign: ' spring' }],
      ['b', { prompt: 'a blue bird', model: 'sdxl' }, { campaign: '=SUM(1)' }],
    ]);
    // Later pages, from the cursor, read them the same way.
    const first = await readBatchPage(file, undefined, { userColumns, maxRows: 1 });
    const second = await readBatchPage(file, first.nextCursor, { userColumns, maxRows: 1 });
    expect(second.rows[0]).toMatchObject({ rowId: 'b', columns: { campaign: '=SUM(1)' } });
  });

  it('bound a sent cell, naming the row, the column and the limit', async () => {
    const file = tmp.file('long.csv', `id,prompt,model,style\nx,a fox,sdxl,${'s'.repeat(4001)}\n`);
    const report = await validateBatchFile(file, { userColumns: { send: { style: 'style' } } });
    expect(report.problems.map((p) => [p.code, p.line, p.field, p.rowId])).toEqual([
      [ProblemCode.FieldInvalid, 2, 'style', 'x'],
    ]);
    expect(report.problems[0]!.message).toBe('style (sent as style by --column) is longer than 4000 characters');
  });

  it('keep carried cells out of what the page-reading activity returns to the workflow', async () => {
    const file = tmp.file('activity.csv', FILE);
    const activities = createBatchFileActivities({ outputRoot: tmp.dir });
    const { MockActivityEnvironment } = await import('@temporalio/testing');
    const res: Awaited<ReturnType<typeof activities.readBatchPage>> = await new MockActivityEnvironment().run(
      (input: Parameters<typeof activities.readBatchPage>[0]) => activities.readBatchPage(input),
      {
        file,
        maxRows: 10,
        userColumns: { carry: ['sku', 'campaign'] },
      },
    );
    expect(res.rows).toEqual([
      { rowId: 'a', line: 2, request: { prompt: 'a red fox', model: 'sdxl' } },
      { rowId: 'b', line: 3, request: { prompt: 'a blue bird', model: 'sdxl' } },
    ]);
  });
});

describe('--carry and --column', () => {
  it('check each value and the options together, naming the option', () => {
    expect(parseColumnOption('sku=meta.sku', parseColumnOption('style=style'))).toEqual({
      style: 'style',
      sku: 'meta.sku',
    });
    expect(() => parseCarryOption('prompt')).toThrow(/--carry: "prompt" is one of imagebatch's request columns/);
    expect(() => parseCarryOption('state')).toThrow(/record columns/);
    expect(() => parseCarryOption('sku', ['sku'])).toThrow(/given twice/);
    expect(() => parseColumnOption('sku')).toThrow(/--column: expected <column>=<request field>/);
    expect(() => parseColumnOption('sku=seed')).toThrow(/seed is a request field/);
    expect(() => parseColumnOption('sku=a..b')).toThrow(/dotted path/);
    expect(() => parseColumnOption('b=x', { a: 'x' })).toThrow(/both be sent as x/);
    expect(() => userColumnsInput({ carry: ['sku'], column: { sku: 'x' } })).toThrow(ColumnOptionError);
    expect(userColumnsInput({})).toEqual({});
    expect(userColumnsInput({ carry: ['sku'] })).toEqual({ userColumns: { carry: ['sku'] } });
  });
});
