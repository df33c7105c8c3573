/**
 * Speed and memory of the batch-file validator and page reader: generates 10k- and 100k-row files (quoted
 * prompts with commas, quotes and line breaks, multi-byte text, every optional column) in a temp folder and
 * prints rows, seconds, rows/s and peak RSS. Goal: 100,000 rows validated in under 5 s.
 *
 *   npx tsx bench/csv-validate.ts
 */
import { createWriteStream, mkdtempSync, rmSync, statSync } from 'node:fs';
import { once } from 'node:events';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { BatchCursor } from '../src/model';
import { readBatchPage, validateBatchFile } from '../src/batch';

async function writeFile(path: string, rows: number): Promise<void> {
  const out = createWriteStream(path);
  out.write('id,prompt,model,negative_prompt,width,height,seed,num_images\n');
  for (let i = 1; i <= rows; i++) {
    const prompt = `"A watercolour of lighthouse #${i}, at dusk, ""soft"" light\nwith gulls, café, 日本 🎨"`;
    const line = `item-${i},${prompt},${i % 3 === 0 ? 'sdxl' : 'flux-dev'},blurry,${512 + (i % 4) * 64},768,${i},${(i % 4) + 1}\n`;
    if (!out.write(line)) await once(out, 'drain');
  }
  out.end();
  await once(out, 'finish');
}

/** Samples RSS every 10 ms while `fn` runs: the peak of this process, including V8 and buffers. */
async function measure<T>(fn: () => Promise<T>): Promise<{ value: T; seconds: number; peakRssMb: number }> {
  let peak = process.memoryUsage.rss();
  const timer = setInterval(() => (peak = Math.max(peak, process.memoryUsage.rss())), 10);
  const started = process.hrtime.bigint();
  try {
    const value = await fn();
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    peak = Math.max(peak, process.memoryUsage.rss());
    return { value, seconds, peakRssMb: peak / 2 ** 20 };
  } finally {
    clearInterval(timer);
  }
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'imagebatch-bench-'));
  const table: Array<Record<string, string | number>> = [];
  try {
    for (const rows of [10_000, 100_000]) {
      const path = join(dir, `rows-${rows}.csv`);
      await writeFile(path, rows);
      const mb = statSync(path).size / 2 ** 20;
      const v = await measure(() => validateBatchFile(path));
      if (!v.value.ok || v.value.validRows !== rows)
        throw new Error(`unexpected report: ${JSON.stringify(v.value.problems[0])}`);
      table.push(row('validateBatchFile', rows, mb, v));
      const p = await measure(async () => {
        let cursor: BatchCursor | undefined;
        let n = 0;
        for (;;) {
          const page = await readBatchPage(path, cursor, { maxRows: 200 });
          n += page.rows.length;
          if (page.done) return n;
          cursor = page.nextCursor;
        }
      });
      if (p.value !== rows) throw new Error(`pages gave ${p.value} rows`);
      table.push(row('readBatchPage x200', rows, mb, p));
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  console.table(table);
}

function row(what: string, rows: number, mb: number, m: { seconds: number; peakRssMb: number }) {
  return {
    what,
    rows,
    'file MB': Number(mb.toFixed(1)),
    seconds: Number(m.seconds.toFixed(2)),
    'rows/s': Math.round(rows / m.seconds),
    'peak RSS MB': Math.round(m.peakRssMb),
  };
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
