import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_API_KEY } from '../../src/simulator';
import { baseEnv, cli, describeRun, ensureDistIsFresh } from './helpers';

/**
 * The commands that need no server: help, validate, usage errors, and how the worker treats API keys. Each is
 * `node bin/imagebatch.js ...` in a child process, checked by exit code, output and (for keys) what it never prints.
 */

const COMMANDS = [
  'demo',
  'simulator',
  'worker',
  'validate',
  'run',
  'status',
  'pause',
  'resume',
  'cancel',
  'ls',
  'results',
] as const;

/** A key of the right format that is nobody's: it must never appear in any output. */
const SECRET_KEY = 'img_live_S3cretS3cretS3cretS3cretS3cretS3cret';

let dir: string;

beforeAll(async () => {
  await ensureDistIsFresh();
  dir = await mkdtemp(path.join(os.tmpdir(), 'imagebatch-cli-offline-'));
});

afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** The commands a `Commands:` section of a help text lists (without `help`). */
function listedCommands(help: string): string[] {
  const section = help.split(/^Commands:\n/m)[1] ?? '';
  return [...section.matchAll(/^ {2}(\S+)/gm)].map((m) => m[1]!).filter((c) => c !== 'help');
}

describe('--help', { timeout: 120_000 }, () => {
  it('every command and subcommand the help lists has its own --help, exiting 0', async () => {
    const root = await cli(['--help']);
    expect(root.code, describeRun(['--help'], root)).toBe(0);
    const top = listedCommands(root.stdout);
    expect(top).toEqual(expect.arrayContaining([...COMMANDS]));
    // Walk the tree a level at a time, four commands at once.
    const seen: string[] = [];
    let level = top.map((c) => [c]);
    while (level.length > 0) {
      const next: string[][] = [];
      for (let i = 0; i < level.length; i += 4) {
        await Promise.all(
          level.slice(i, i + 4).map(async (command) => {
            const args = [...command, '--help'];
            const r = await cli(args);
            expect(r.code, describeRun(args, r)).toBe(0);
            expect(r.stdout).toContain(`Usage: imagebatch ${command.join(' ')} `);
            // One screen: the help of every command fits 24 lines (test/cli/help.test.ts checks each at 80 columns).
            expect(r.stdout.trimEnd().split('\n').length, r.stdout).toBeLessThanOrEqual(24);
            expect(r.stderr).toBe('');
            seen.push(command.join(' '));
            for (const sub of listedCommands(r.stdout)) next.push([...command, sub]);
          }),
        );
      }
      expect(seen.length, 'a bounded command tree').toBeLessThan(100);
      level = next;
    }
    expect(seen).toEqual(expect.arrayContaining([...COMMANDS]));
  });
});

describe('validate', () => {
  it('a good file: exit 0, row counts per model, nothing on stderr', async () => {
    const file = path.join(dir, 'good.csv');
    await writeFile(
      file,
      [
        'id,prompt,model,width,height,num_images',
        'a,"a lighthouse on a cliff, at dusk",flux-dev,512,512,2',
        'b,a red fox in fresh snow,,,,',
        'c,a tram crossing a bridge at night,flux-schnell,,,',
        '',
      ].join('\n'),
    );
    const args = ['validate', file, '--model', 'flux-dev'];
    const r = await cli(args);
    expect(r.code, describeRun(args, r)).toBe(0);
    expect(r.stdout).toContain('3 rows, 3 valid, 0 problem(s)');
    expect(r.stdout).toContain('flux-dev: 2 rows, 3 images');
    expect(r.stdout).toContain('flux-schnell: 1 rows, 1 images');
    expect(r.stderr).toBe('');

    const json = await cli([...args, '--json']);
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout)).toMatchObject({ ok: true, report: { rows: 3, validRows: 3, problemCount: 0 } });
  });

  it('a bad file: exit 3 and every problem as file:line (field)', async () => {
    const file = path.join(dir, 'bad.csv');
    await writeFile(
      file,
      [
        'id,prompt,model,width,seed',
        'ok1,a calm sea under a full moon,flux-dev,512,1',
        'w,a calm sea under a full moon,flux-dev,300,1',
        'p,,flux-dev,512,1',
        'm,a calm sea under a full moon,,512,1',
        's,a calm sea under a full moon,flux-dev,512,-4',
        '',
      ].join('\n'),
    );
    const r = await cli(['validate', file]);
    expect(r.code, describeRun(['validate', file], r)).toBe(3);
    expect(r.stdout).toContain('5 rows, 1 valid, 4 problem(s)');
    const problems = r.stderr.trim().split('\n');
    expect(problems).toEqual([
      expect.stringMatching(new RegExp(`^${escape(file)}:3 \\(width\\): .*multiple of 64`)),
      expect.stringMatching(new RegExp(`^${escape(file)}:4 \\(prompt\\): prompt is empty`)),
      expect.stringMatching(new RegExp(`^${escape(file)}:5 \\(model\\): `)),
      expect.stringMatching(new RegExp(`^${escape(file)}:6 \\(seed\\): `)),
    ]);
  });

  it('a file that does not exist: a clear error, not exit 0', async () => {
    const file = path.join(dir, 'missing.csv');
    const r = await cli(['validate', file]);
    expect(r.code, describeRun(['validate', file], r)).not.toBe(0);
    expect(r.stderr).toContain(file);
  });
});

describe.concurrent('usage errors exit 2', () => {
  it.each([
    [['no-such-command'], /unknown command 'no-such-command'/],
    [['run'], /missing required argument 'file'/],
    [['status'], /missing required argument 'batch'/],
    [['run', 'x.csv', '--concurrency', '0'], /--concurrency.*must be a whole number of at least 1/],
    [['ls', '--no-such-option'], /unknown option '--no-such-option'/],
    [['run', 'x.csv', '--price', 'sdxl'], /--price.*expected <model>=<usd per image>, got "sdxl"/],
    [['run', 'x.csv', '--price', 'sdxl=cheap'], /--price.*the price of sdxl must be a decimal number of USD/],
    [
      ['validate', 'x.csv', '--prices', '/no/such/prices.json'],
      /--prices: cannot read \/no\/such\/prices.json: ENOENT/,
    ],
  ])('imagebatch %j', async (args, message) => {
    const r = await cli(args);
    expect(r.code, describeRun(args, r)).toBe(2);
    expect(r.stderr).toMatch(message);
  });
});

describe('the API key is never an argument and never printed', () => {
  // Every Temporal setting is valid, so only the key decides; nothing listens at this address.
  const env = (extra: Record<string, string>) =>
    baseEnv({ TEMPORAL_ADDRESS: '127.0.0.1:9', IMAGEGEN_BASE_URL: 'http://127.0.0.1:9/api/public/v1', ...extra });

  it.each([
    ['worker --api-key KEY', ['worker', '--api-key', SECRET_KEY]],
    ['worker --api-key=KEY', ['worker', `--api-key=${SECRET_KEY}`]],
    ['worker KEY', ['worker', SECRET_KEY]],
  ])('imagebatch %s exits 2 without echoing the key', async (_label, args) => {
    const r = await cli(args, { env: env({ IMAGEGEN_API_KEY: DEMO_API_KEY }) });
    expect(r.code, describeRun(args, r)).toBe(2);
    expect(r.stdout + r.stderr).not.toContain(SECRET_KEY);
    expect(r.stdout + r.stderr).not.toContain('S3cret');
    expect(r.stdout + r.stderr).not.toContain(DEMO_API_KEY);
  });

  it('no IMAGEGEN_API_KEY: worker exits 1 naming the variable, printing no key', async () => {
    const r = await cli(['worker'], { env: env({ TEMPORAL_API_KEY: SECRET_KEY, TEMPORAL_TLS: 'false' }) });
    expect(r.code, describeRun(['worker'], r)).toBe(1);
    expect(r.stderr).toContain('IMAGEGEN_API_KEY');
    expect(r.stdout + r.stderr).not.toContain('S3cret');
    expect(r.stdout).toBe('');
  });

  it('a malformed IMAGEGEN_API_KEY: worker exits 1 naming the variable, not quoting the key', async () => {
    const bad = 'img_live_S3cretButTooShort';
    const r = await cli(['worker'], { env: env({ IMAGEGEN_API_KEY: bad }) });
    expect(r.code, describeRun(['worker'], r)).toBe(1);
    expect(r.stderr).toContain('IMAGEGEN_API_KEY');
    expect(r.stdout + r.stderr).not.toContain('S3cret');
  });
});

function escape(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
