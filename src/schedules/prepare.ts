import { createWriteStream } from 'node:fs';
import { appendFile, mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { stringify } from 'csv-stringify/sync';
import { request, type Dispatcher } from 'undici';
import { readBatchPage, type BatchCursor } from '../batch';

/** Options of {@link prepareScheduledInput}. */
export interface PrepareInput {
  /** A path the worker can read, or an http(s) URL. */
  source: string;
  /** Folder of this run's input copy. */
  runDir: string;
  /** File listing the row ids that succeeded in earlier runs of the schedule, one per line. */
  succeededIdsFile: string;
  /** Leave out rows whose id already succeeded in an earlier run. */
  skipSucceeded: boolean;
  defaultModel?: string;
  /**
   * Largest source accepted from a URL.
   * @default 512 MiB
   */
  maxBytes?: number;
}

export interface PreparedInput {
  /** The run's own copy of the batch file (ids made explicit, so positional ids stay stable). */
  file: string;
  rows: number;
  skipped: number;
  invalid: number;
}

const COLUMNS = ['id', 'prompt', 'model', 'negative_prompt', 'width', 'height', 'seed', 'num_images'] as const;

/**
 * Makes the input of one scheduled run: fetches the source (file or URL), and writes the rows to run, with
 * their ids, leaving out the ids that already succeeded when asked, so that a growing file only pays for its
 * new rows. The copy also pins the run to the file as it was when the run started.
 */
export async function prepareScheduledInput(input: PrepareInput, dispatcher?: Dispatcher): Promise<PreparedInput> {
  await mkdir(input.runDir, { recursive: true });
  const source = /^https?:\/\//i.test(input.source)
    ? await download(
        input.source,
        path.join(input.runDir, 'source.csv'),
        input.maxBytes ?? 512 * 1024 * 1024,
        dispatcher,
      )
    : input.source;
  const done = input.skipSucceeded ? await readIds(input.succeededIdsFile) : new Set<string>();
  const out: string[][] = [[...COLUMNS]];
  let skipped = 0;
  let invalid = 0;
  let cursor: BatchCursor | undefined;
  for (;;) {
    const page = await readBatchPage(source, cursor, {
      maxRows: 1000,
      ...(input.defaultModel ? { defaultModel: input.defaultModel } : {}),
    });
    invalid += page.invalidRows;
    for (const row of page.rows) {
      if (done.has(row.rowId)) {
        skipped += 1;
        continue;
      }
      const r = row.request;
      out.push([
        row.rowId,
        r.prompt,
        r.model,
        r.negative_prompt ?? '',
        ...[r.width, r.height, r.seed, r.num_images].map((v) => (v === undefined ? '' : String(v))),
      ]);
    }
    if (page.done) break;
    cursor = page.nextCursor;
  }
  const file = path.join(input.runDir, 'input.csv');
  await writeAtomic(file, stringify(out));
  return { file, rows: out.length - 1, skipped, invalid };
}

/** Appends row ids to the schedule's record of succeeded rows. */
export async function recordSucceededIds(file: string, ids: readonly string[]): Promise<void> {
  if (ids.length === 0) return;
  await mkdir(path.dirname(file), { recursive: true });
  await appendFile(file, ids.map((id) => `${id}\n`).join(''));
}

async function readIds(file: string): Promise<Set<string>> {
  try {
    return new Set((await readFile(file, 'utf8')).split('\n').filter((l) => l !== ''));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return new Set();
    throw err;
  }
}

async function download(url: string, dest: string, maxBytes: number, dispatcher?: Dispatcher): Promise<string> {
  const res = await request(url, {
    method: 'GET',
    headersTimeout: 30_000,
    bodyTimeout: 60_000,
    ...(dispatcher ? { dispatcher } : {}),
  });
  if (res.statusCode !== 200) {
    await res.body.dump();
    throw new Error(`fetching the batch source ${url}: HTTP ${res.statusCode}`);
  }
  const declared = Number(res.headers['content-length'] ?? NaN);
  if (declared > maxBytes) {
    await res.body.dump();
    throw new Error(`the batch source ${url} is ${declared} bytes, over the limit of ${maxBytes}`);
  }
  const tmp = `${dest}.tmp`;
  let seen = 0;
  res.body.on('data', (chunk: Buffer) => {
    seen += chunk.length;
    if (seen > maxBytes) res.body.destroy(new Error(`the batch source ${url} is over the limit of ${maxBytes} bytes`));
  });
  try {
    await pipeline(res.body, createWriteStream(tmp));
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
  await rename(tmp, dest);
  return dest;
}

async function writeAtomic(file: string, content: string): Promise<void> {
  const tmp = `${file}.tmp`;
  await writeFile(tmp, content, 'utf8');
  await rename(tmp, file);
}
