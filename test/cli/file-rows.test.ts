import { readFile, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { inProcessCli } from './in-process';
import { BatchValidationError, prepareBatch } from '../../src/cli/batches';

/**
 * Files as people have them, through the real entry `main()` (validate reads the file only; run reads it, and with
 * --skip-invalid writes rejected.csv, before it connects: Temporal's address is a closed port) and `prepareBatch`.
 */

const cli = inProcessCli('imagebatch-file-rows-');

// A Temporal address that is not one: a command that got as far as connecting stops at once.
const env = () => ({ TEMPORAL_ADDRESS: '127.0.0.1:port', IMAGEBATCH_LEDGER: path.join(cli.dir, 'ledger.sqlite') });
const run = (...args: string[]) => cli.run(env(), ...args);

const PROMPT_SET = [
  'Prompt\tCategory\tChallenge\tNote',
  'A red fox, sitting in the snow\tAnimals\tBasic\t',
  'A sign that says "Deep Learning"\tArts\tWriting & Symbols\tquotes, commas',
  'an astronaut riding a horse\tPeople\tImagination\t',
].join('\n');

const options = (file: string) => ({
  batchId: 'b',
  file,
  outDir: path.join(cli.dir, 'out'),
  concurrency: 1,
  maxAttempts: 1,
});

describe('a tab-separated prompt set with its own columns', () => {
  it('validates with --model alone, saying how it was read and what is carried', async () => {
    const file = path.join(cli.dir, 'parti.tsv');
    await writeFile(file, PROMPT_SET);
    const code = await run('validate', file, '--model', 'sdxl');
    expect(cli.stderr.join('')).toBe(
      `${file}: read as tab-separated (TSV)\n` +
        `${file}: carried into the results, never sent: Category, Challenge, Note ` +
        '(send one with --column <name>=<field>)\n',
    );
    expect(cli.stdout.join('')).toBe('3 rows, 3 valid, 0 problem(s)\nsdxl: 3 rows, 3 images\n');
    expect(code).toBe(0);
    cli.stdout.length = 0;
    await run('validate', file, '--model', 'sdxl', '--json');
    const json = JSON.parse(cli.stdout.join('')) as { ok: boolean; report: { format: string; carried: string[] } };
    expect(json).toMatchObject({ ok: true, report: { format: 'tab', carried: ['Category', 'Challenge', 'Note'] } });
  });

  it('is prepared with every other column carried, explicit --carry first, --column sent', async () => {
    const file = path.join(cli.dir, 'parti2.tsv');
    await writeFile(file, PROMPT_SET);
    const plain = await prepareBatch({ ...options(file), defaultModel: 'sdxl' });
    expect(plain.input.userColumns).toEqual({ carry: ['Category', 'Challenge', 'Note'] });
    expect('skipInvalid' in plain.input).toBe(false);
    const given = await prepareBatch({
      ...options(file),
      defaultModel: 'sdxl',
      userColumns: { carry: ['Note'], send: { Category: 'meta.category' } },
    });
    expect(given.input.userColumns).toEqual({ carry: ['Note', 'Challenge'], send: { Category: 'meta.category' } });
  });
});

const BAD_ROWS = ['id,prompt,model,width', 'a,a fox,m,512', 'b,,m,512', 'c,a cat,m,500', 'd,a dog,m,', ''].join('\n');

describe('--skip-invalid', () => {
  it('run refuses a file with invalid rows without it', async () => {
    const file = path.join(cli.dir, 'bad.csv');
    await writeFile(file, BAD_ROWS);
    await expect(prepareBatch(options(file))).rejects.toThrow(BatchValidationError);
  });

  it('validate previews it: exit 0, saying the valid rows run', async () => {
    const file = path.join(cli.dir, 'bad-preview.csv');
    await writeFile(file, BAD_ROWS);
    expect(await run('validate', file)).toBe(3);
    cli.stderr.length = 0;
    expect(await run('validate', file, '--skip-invalid')).toBe(0);
    expect(cli.stderr.join('')).toContain(
      `${file}: run --skip-invalid would run the 2 valid rows and list the others\n`,
    );
  });

  it('run writes rejected.csv with each row left out, its line and problem, before it connects', async () => {
    const file = path.join(cli.dir, 'bad-run.csv');
    await writeFile(file, BAD_ROWS);
    const out = path.join(cli.dir, 'out-run');
    const code = await run('run', file, '--skip-invalid', '--out', out);
    const printed = cli.stderr.join('');
    expect(printed).toContain(
      `skipped 2 invalid row(s) (--skip-invalid): each with its line and problem in ${out}/rejected.csv\n`,
    );
    expect(printed).toMatch(/TEMPORAL_ADDRESS/); // it got as far as connecting, after rejected.csv was written
    expect(code).not.toBe(0);
    const rejected = await readFile(path.join(out, 'rejected.csv'), 'utf8');
    expect(rejected.split('\n')).toEqual([
      'line,id,field,code,problem',
      '3,b,prompt,row.field_invalid,prompt is empty',
      '4,c,width,row.field_invalid,"width must be a multiple of 64 (got ""500"")"',
      '',
    ]);
  });

  it('still refuses a problem of the whole file, or a row id used twice', async () => {
    const cases: [string, string, RegExp][] = [
      ['dup.csv', 'id,prompt,model\na,x,m\na,y,m\nb,,m\n', /row id "a" is used twice \(lines 2 and 3\)/],
      ['quote.csv', 'prompt,model\nok,m\n"open,m\nmore,m\n', /never closed/],
      ['header.csv', 'prompt,model,,x\na,m,,\n', /has no name/],
      ['empty.csv', '', /empty/],
    ];
    for (const [name, content, why] of cases) {
      const file = path.join(cli.dir, name);
      await writeFile(file, content);
      const err = await prepareBatch({ ...options(file), skipInvalid: true }).catch((e: unknown) => e);
      expect(err, name).toBeInstanceOf(BatchValidationError);
      expect((err as Error).message, name).toMatch(/--skip-invalid leaves out invalid rows only, and here/);
      expect((err as Error).message, name).toMatch(why);
    }
    expect(existsSync(path.join(cli.dir, 'out', 'rejected.csv'))).toBe(false);
  });
});

describe('a file that is not text', () => {
  it('is one problem', async () => {
    const file = path.join(cli.dir, 'book.csv');
    await writeFile(file, Buffer.concat([Buffer.from('PK\x03\x04', 'latin1'), Buffer.alloc(200, 1)]));
    const code = await run('validate', file);
    expect(cli.stderr.join('')).toBe(
      `${file}:1: the file is an Excel workbook or another zip archive, not text: save it as CSV UTF-8\n`,
    );
    expect(code).toBe(3);
  });
});
