import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { DemoResult } from '../../src/cli/commands/demo';
import { baseEnv, cli, describeRun, ensureDistIsFresh, readCsv } from './helpers';

/**
 * `imagebatch demo --home <tmp> --json` as a user runs it: the embedded dev server, the simulator and a worker in
 * one process, the bundled 50-row batch to its end, then the results and the gallery on disk.
 */

let home: string;

beforeAll(async () => {
  await ensureDistIsFresh();
  home = await mkdtemp(path.join(os.tmpdir(), 'imagebatch-cli-demo-'));
});

afterAll(async () => {
  if (home) await rm(home, { recursive: true, force: true });
});

it('demo --json runs the bundled batch to its end and writes the results and the gallery', async () => {
  const args = ['demo', '--home', home, '--json'];
  const r = await cli(args, { env: baseEnv(), timeoutMs: 150_000 });
  expect(r.code, describeRun(args, r)).toBe(0);
  const res = JSON.parse(r.stdout) as DemoResult;
  // The terminal is for people: the worker's retries (the bundled batch loses a response on purpose) and their
  // stacks go to <home>/logs/worker.log (seen: a WARN with a stack in the middle of the progress).
  expect(r.stderr).not.toMatch(/\[WARN\]|\n\s+at /);
  const log = path.join(home, 'logs', 'worker.log');
  expect(await readFile(log, 'utf8')).toContain('[WARN] Activity failed');
  // ... and one line on stderr says how many warnings it got, what they were, and where it is.
  const summary = r.stderr.split('\n').filter((line) => line.includes(' logged ('));
  expect(summary).toHaveLength(1);
  expect(summary[0]).toMatch(/^\d+ warnings? logged \(.*a lost response retried with its key.*\) — see /);
  expect(summary[0]?.endsWith(`— see ${log}`)).toBe(true);

  expect(res.batchId).toBe('demo');
  expect(res.resumed).toBe(false);
  expect(res.progress).toMatchObject({ status: 'completed', done: true, rowsRead: 50, inFlight: 0 });
  const c = res.progress.counts;
  expect(c.succeeded + c.failed + c.unknown + c.cancelled + c.not_run).toBe(50);
  expect(c.succeeded).toBeGreaterThan(30);
  expect(c.failed).toBeGreaterThan(0); // the bundled batch shows every kind of outcome

  const outDir = path.join(home, 'demo');
  expect(res.results).toMatchObject({
    resultsCsv: path.join(outDir, 'results.csv'),
    resultsJsonl: path.join(outDir, 'results.jsonl'),
    errorsCsv: path.join(outDir, 'errors.csv'),
    unresolvedCsv: path.join(outDir, 'unresolved.csv'),
    gallery: path.join(outDir, 'index.html'),
    rows: 50,
  });
  expect(fileURLToPath(res.galleryUrl)).toBe(res.results.gallery);
  expect(existsSync(path.join(home, 'temporal.sqlite'))).toBe(true);

  const csv = await readCsv(res.results.resultsCsv);
  expect(csv).toHaveLength(50);
  // errors.csv holds the rows safe to submit again, unresolved.csv those that may have been paid: all the others.
  const errors = await readCsv(res.results.errorsCsv);
  expect(errors).toHaveLength(res.results.errorRows);
  const unresolved = await readCsv(res.results.unresolvedCsv);
  expect(unresolved).toHaveLength(res.results.unresolvedRows);
  expect(res.results.errorRows + res.results.unresolvedRows).toBe(50 - c.succeeded);
  const advice = res.results.errorAdvice;
  expect(advice.submit_again + advice.revise_prompt + advice.fix_row).toBe(res.results.errorRows);
  expect(errors.filter((r) => r.advice === 'revise_prompt')).toHaveLength(advice.revise_prompt);
  // The bundled batch meets the safety filter (twice) and a model the account lacks.
  expect(advice.revise_prompt).toBe(2);
  expect(advice.fix_row).toBeGreaterThanOrEqual(1);

  // The gallery: one card per row, one thumbnail per downloaded image, each on disk next to it.
  const html = await readFile(res.results.gallery, 'utf8');
  expect(html.match(/<figure class="card /g)).toHaveLength(50);
  const images = [...html.matchAll(/<img src="([^"]+)"/g)].map((m) => decodeURIComponent(m[1]!));
  const expected = csv.flatMap((row) => (row.images ? row.images.split(' ') : []));
  expect(images).toEqual(expected);
  expect(images.length).toBeGreaterThanOrEqual(c.succeeded);
  for (const image of images) expect(existsSync(path.join(outDir, image)), image).toBe(true);
}, 180_000);
