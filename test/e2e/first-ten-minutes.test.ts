import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN, REPO_ROOT, baseEnv, cli, describeRun, ensureDistIsFresh, readCsv } from '../cli/helpers';

/**
 * A new user's first ten minutes (#31), as they type them: the simulator in one terminal; in another, the lines it
 * printed, then their own file (tab-separated, a capitalised header, columns of their own) validated, run, run again,
 * and its results. Every message is asserted as the text a person reads. The commands run as `node bin/imagebatch.js`
 * (what `npx imagebatch` runs in the clone), in local mode: no Temporal address, the key in the environment.
 */

let dir: string;
let home: string;
let simulator: ChildProcess;
/** What the simulator printed, line by line. */
let printed: string[] = [];
/** The user's shell after pasting the simulator's export lines. */
let env: Record<string, string>;

const FILE = 'prompts.tsv';
const ROWS = [
  'Prompt\tCategory\tChallenge\tNote',
  'A red fox in the snow\tAnimals\tBasic\t',
  'A sign that says "Open"\tArts\tWriting\tquotes',
  'an astronaut riding a horse\tPeople\tImagination\tthe classic one',
];

/** Starts `imagebatch simulator` as a person does, and resolves with its lines once it says how to stop it. */
function startSimulator(): Promise<string[]> {
  return new Promise((resolve, reject) => {
    simulator = spawn(process.execPath, [BIN, 'simulator', '--port', '0', '--files-port', '0'], {
      cwd: REPO_ROOT,
      env: baseEnv(),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    const timer = setTimeout(() => reject(new Error(`the simulator said nothing in 30 s:\n${out}`)), 30_000);
    simulator.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString('utf8');
      if (out.includes('(Ctrl-C stops it)\n')) {
        clearTimeout(timer);
        resolve(out.trimEnd().split('\n'));
      }
    });
    simulator.once('exit', (code) => reject(new Error(`the simulator exited (${code}):\n${out}`)));
  });
}

/** The creations the simulator charged for, by idempotency key. */
async function charges(): Promise<string[]> {
  const url = /^ledger: +(\S+)$/.exec(printed.find((l) => l.startsWith('ledger:')) ?? '')?.[1];
  const res = await fetch(url!);
  const { entries } = (await res.json()) as { entries: { kind: string; idempotencyKey: string }[] };
  return entries.filter((e) => e.kind === 'charge').map((e) => e.idempotencyKey);
}

beforeAll(async () => {
  await ensureDistIsFresh();
  dir = await mkdtemp(path.join(os.tmpdir(), 'imagebatch-first-minutes-'));
  home = path.join(dir, 'home');
  printed = await startSimulator();
}, 120_000);

afterAll(async () => {
  if (env) await cli(['local', 'stop'], { env, cwd: dir, timeoutMs: 60_000 });
  simulator?.kill('SIGINT');
  if (dir) await rm(dir, { recursive: true, force: true });
});

const run = (args: string[], timeoutMs = 30_000) => cli(args, { env, cwd: dir, timeoutMs });

describe("a new user's first ten minutes", { timeout: 180_000 }, () => {
  it('the simulator prints the lines to paste, each of them one that works', () => {
    expect(printed[0]).toMatch(/^simulator API: http:\/\/127\.0\.0\.1:\d+\/api\/public\/v1$/);
    const hint = printed.indexOf('To run a batch against it from this machine (in another terminal):');
    expect(hint).toBeGreaterThan(0);
    expect(printed.slice(hint + 1)).toEqual([
      expect.stringMatching(/^ {2}export IMAGEGEN_BASE_URL=http:\/\/127\.0\.0\.1:\d+\/api\/public\/v1$/),
      expect.stringMatching(/^ {2}export IMAGEGEN_API_KEY=img_live_\w+$/),
      '  npx imagebatch run examples/demo-prompts.csv --model flux-dev',
      '(a worker you start yourself, npx imagebatch worker, needs the same variables)',
      '(Ctrl-C stops it)',
    ]);
    // The user's shell: the exports pasted, no Temporal address (local mode), a home and store of this test's own.
    const exported: Record<string, string> = {};
    for (const line of printed) {
      const [, name, value] = /^ {2}export (\w+)=(\S+)$/.exec(line) ?? [];
      if (name && value) exported[name] = value;
    }
    const { IMAGEBATCH_LOCAL: _off, ...shell } = baseEnv({
      ...exported,
      IMAGEBATCH_HOME: home,
      IMAGEBATCH_LEDGER: path.join(dir, 'ledger.sqlite'),
      XDG_CONFIG_HOME: path.join(dir, 'no-config'),
    });
    env = shell;
    expect(Object.keys(exported)).toEqual(['IMAGEGEN_BASE_URL', 'IMAGEGEN_API_KEY']);
  });

  it('their own tab-separated file validates with no option but --model, the catalog checked for free', async () => {
    await writeFile(path.join(dir, FILE), `${ROWS.join('\n')}\n`);
    const r = await run(['validate', FILE, '--model', 'flux-dev']);
    expect(r.code, describeRun(['validate'], r)).toBe(0);
    expect(r.stderr).toBe(
      `${FILE}: read as tab-separated (TSV)\n` +
        `${FILE}: carried into the results, never sent: Category, Challenge, Note ` +
        '(send one with --column <name>=<field>)\n',
    );
    expect(r.stdout).toBe(
      '3 rows, 3 valid, 0 problem(s)\nflux-dev: 3 rows, 3 images, $0.04 per image (catalog)\nestimated cost: $0.12\n',
    );
    const wrong = await run(['validate', FILE, '--model', 'flux-ultra']);
    expect(wrong.code, describeRun(['validate', '--model', 'flux-ultra'], wrong)).toBe(3);
    expect(wrong.stderr).toMatch(
      /model flux-ultra \(3 rows\) is not available to this account \(its models: .*flux-dev/,
    );
    expect(await charges()).toEqual([]);
  });

  it('run: a local server and worker start, the batch is followed to its end, results are written', async () => {
    const r = await run(['run', FILE, '--model', 'flux-dev'], 120_000);
    expect(r.code, describeRun(['run'], r)).toBe(0);
    const lines = r.stderr.trimEnd().split('\n');
    expect(lines.slice(0, 2)).toEqual([
      `${FILE}: read as tab-separated (TSV)`,
      `${FILE}: carried into the results, never sent: Category, Challenge, Note (send one with --column <name>=<field>)`,
    ]);
    expect(lines).toContainEqual(
      expect.stringMatching(/^started the local Temporal server \(pid \d+, 127\.0\.0\.1:\d+; logs in .*\/logs\)$/),
    );
    expect(lines).toContain('3 rows: 0 already paid (reused, $0.00), 3 new (about $0.12 at the catalog price)');
    expect(lines).toContain('started batch prompts (3 rows)');
    const out = path.join(dir, 'out', 'prompts');
    expect(lines).toContain(`results: ${out}/results.csv (3 rows); gallery: ${out}/index.html`);
    expect(lines.at(-1)).toBe(`errors.csv: no rows to submit again (${out}/errors.csv)`);
    expect(r.stdout).toMatch(/^\[#{24}\] 3\/3 \| ok 3 \| failed 0 \| in flight 0 \| spent \$0\.12 \|/);
    expect((await charges()).sort()).toEqual(['ib/prompts/row-1/a1', 'ib/prompts/row-2/a1', 'ib/prompts/row-3/a1']);
  });

  it('the same command again: nothing new sent, and it says so', async () => {
    const r = await run(['run', FILE, '--model', 'flux-dev'], 120_000);
    expect(r.code, describeRun(['run again'], r)).toBe(0);
    const lines = r.stderr.trimEnd().split('\n');
    expect(lines).toContain('3 rows: 3 ran before in this batch (counted from their records), 0 new ($0.00)');
    expect(lines).toContain('started batch prompts again (3 rows)');
    expect(lines).toContain('batch prompts is complete: 3 rows, nothing new sent ($0.12 paid earlier)');
    expect(await charges()).toHaveLength(3);
  });

  it('results: the files, with their own columns carried under their own names', async () => {
    const r = await run(['results', 'prompts']);
    const out = path.join(dir, 'out', 'prompts');
    expect(r.code, describeRun(['results'], r)).toBe(0);
    expect(r.stdout).toBe(
      `3 rows -> ${out}/results.csv\ngallery: ${out}/index.html\nerrors.csv: no rows to submit again (${out}/errors.csv)\n`,
    );
    const rows = await readCsv(path.join(out, 'results.csv'));
    expect(rows.map((row) => [row.row_id, row.state, row.prompt, row['col:Category'], row['col:Note']])).toEqual([
      ['row-1', 'succeeded', 'A red fox in the snow', 'Animals', ''],
      ['row-2', 'succeeded', 'A sign that says "Open"', 'Arts', 'quotes'],
      ['row-3', 'succeeded', 'an astronaut riding a horse', 'People', 'the classic one'],
    ]);
    expect(await readFile(path.join(out, 'index.html'), 'utf8')).toContain('an astronaut riding a horse');
  });

  it('a typo: the error and its suggestion, not a screen of help', async () => {
    const r = await run(['run', FILE, '--modle', 'flux-dev']);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toBe(
      "error: unknown option '--modle'\n(Did you mean --model?)\nimagebatch run --help for usage\n",
    );
  });
});
