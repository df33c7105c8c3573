import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BatchProgress } from '../../src/model';
import { cli, cliJson, describeRun, readCsv } from './helpers';
import { chargedKeys, startStack, type CliStack } from './stack';

/**
 * Files no one here wrote, run as a user runs them (`node bin/imagebatch.js ...` children) against the dev server,
 * the simulator and an `imagebatch worker`: a tab-separated prompt set with a byte-order mark, a capitalised header
 * and columns of its own, one row of it invalid, run with `--skip-invalid`; and a JSON Lines file.
 */

let stack: CliStack;

beforeAll(async () => {
  stack = await startStack({
    simulator: {
      seed: 5,
      generation: { queuedMs: { minMs: 20, maxMs: 60 }, runningMs: { minMs: 50, maxMs: 150 } },
      limits: { minPollIntervalMs: 100, requestsPerSecond: 1000, burst: 1000, accountConcurrency: null },
      safety: { genericDeclineProbability: 0 },
    },
    minPollIntervalMs: 120,
  });
});

afterAll(async () => {
  await stack?.stop();
});

const env = () => ({ env: stack.cliEnv });

const PROMPT_SET = [
  'Prompt\tCategory\tChallenge\tNote',
  'A red fox, sitting in the snow\tAnimals\tBasic\t',
  '\tArts\tWriting & Symbols\tno prompt: rejected',
  'A sign that says "Deep Learning"\tArts\tWriting & Symbols\tquotes, commas',
  'an astronaut riding a horse\tPeople\tImagination\tthe classic one',
];

describe('a tab-separated prompt set, run with --skip-invalid', { timeout: 120_000 }, () => {
  it('runs the valid rows, lists the other in rejected.csv, and carries the columns into the results', async () => {
    const file = path.join(stack.dir, 'parti.tsv');
    const out = path.join(stack.dir, 'out-parti');
    await writeFile(file, Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(PROMPT_SET.join('\r\n'))]));

    const refused = await cli(['run', file, '--model', 'flux-dev', '--out', out], env());
    expect(refused.code, describeRun(['run', file], refused)).toBe(3);
    expect(refused.stderr).toContain('line 3 (prompt): prompt is empty');

    const args = ['run', file, '--batch-id', 'parti', '--model', 'flux-dev', '--out', out];
    args.push('--skip-invalid', '--max-attempts', '1', '--follow', '--json');
    const r = await cli(args, { ...env(), timeoutMs: 60_000 });
    expect(r.code, describeRun(args, r)).toBe(0);
    expect(r.stderr).toContain(`${file}: read as tab-separated (TSV)\n`);
    expect(r.stderr).toContain(
      `${file}: carried into the results, never sent: Category, Challenge, Note (send one with --column <name>=<field>)\n`,
    );
    expect(r.stderr).toContain(
      `skipped 1 invalid row(s) (--skip-invalid): each with its line and problem in ${out}/rejected.csv\n`,
    );
    expect(r.stderr).toContain('started batch parti (3 rows)');
    const final = JSON.parse(r.stdout) as BatchProgress;
    expect(final).toMatchObject({ done: true, started: 3, counts: { succeeded: 3, failed: 0 } });
    expect(chargedKeys(stack.sim, 'parti')).toHaveLength(3);

    expect(await readCsv(path.join(out, 'rejected.csv'))).toEqual([
      { line: '3', id: 'row-2', field: 'prompt', code: 'row.field_invalid', problem: 'prompt is empty' },
    ]);

    await cliJson(['results', 'parti', '--json'], env());
    const results = await readCsv(path.join(out, 'results.csv'));
    expect(results.map((row) => [row.row_id, row.line, row.state, row['col:Category'], row['col:Note']])).toEqual([
      ['row-1', '2', 'succeeded', 'Animals', ''],
      ['row-3', '4', 'succeeded', 'Arts', 'quotes, commas'],
      ['row-4', '5', 'succeeded', 'People', 'the classic one'],
    ]);
    expect(results[1]!.prompt).toBe('A sign that says "Deep Learning"');
    const jsonl = (await readFile(path.join(out, 'results.jsonl'), 'utf8')).trim().split('\n');
    expect((JSON.parse(jsonl[0]!) as { columns: unknown }).columns).toEqual({
      Category: 'Animals',
      Challenge: 'Basic',
      Note: '',
    });
  });
});

describe('a JSON Lines file', { timeout: 120_000 }, () => {
  it('validates, runs and reports its extra keys as carried', async () => {
    const file = path.join(stack.dir, 'requests.jsonl');
    const out = path.join(stack.dir, 'out-jsonl');
    const lines = [
      '{"id": "fox", "prompt": "a red fox", "width": 1024, "campaign": "spring"}',
      '{"id": "owl", "prompt": "an owl at night", "campaign": "autumn"}',
    ];
    await writeFile(file, `${lines.join('\n')}\n`);
    const v = await cli(['validate', file, '--model', 'flux-dev'], env());
    expect(v.code, describeRun(['validate', file], v)).toBe(0);
    expect(v.stderr).toContain(`${file}: read as JSON Lines\n`);
    const args = ['run', file, '--model', 'flux-dev', '--out', out, '--follow', '--json'];
    const r = await cli(args, { ...env(), timeoutMs: 60_000 });
    expect(r.code, describeRun(args, r)).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ done: true, counts: { succeeded: 2 } });
    await cliJson(['results', 'requests', '--json'], env());
    const results = await readCsv(path.join(out, 'results.csv'));
    expect(results.map((row) => [row.row_id, row['col:campaign']])).toEqual([
      ['fox', 'spring'],
      ['owl', 'autumn'],
    ]);
  });
});
