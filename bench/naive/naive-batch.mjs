// The script a user would write instead of imagebatch: a p-limit pool over fetch, retries on 429, 5xx and network
// errors (waiting Retry-After when there is one, else doubling a 1 s backoff), polling every documented minimum
// interval, then downloading the image. No idempotency key: a retry after a 500 or a reset that happened after the
// charge is a new, second charge. Kept deliberately plain; the benchmark compares imagebatch against it.
//
//   IMAGEGEN_API_KEY=... node bench/naive/naive-batch.mjs --csv prompts.csv --base-url URL --out dir
//     [--concurrency 20] [--poll-ms 1000] [--max-tries 5]
//
// Prints one JSON line at the end: rows, succeeded, failed, requests, tooMany, seconds.
/* global fetch, Buffer */
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { parse } from 'csv-parse/sync';
import pLimit from 'p-limit';

const args = Object.fromEntries(
  process.argv
    .slice(2)
    .join(' ')
    .split('--')
    .filter(Boolean)
    .map((part) => part.trim().split(/\s+/)),
);
const baseUrl = args['base-url'];
const concurrency = Number(args.concurrency ?? 20);
const pollMs = Number(args['poll-ms'] ?? 1000);
const maxTries = Number(args['max-tries'] ?? 5);
const outDir = args.out ?? 'naive-out';
const headers = { authorization: `Bearer ${process.env.IMAGEGEN_API_KEY}`, 'content-type': 'application/json' };

let requests = 0;
let tooMany = 0;

/** fetch with retries: on 429 and 5xx wait Retry-After (or 1 s, 2 s, 4 s...) and try again; same on network errors. */
async function fetchWithRetry(url, init) {
  for (let attempt = 1; ; attempt++) {
    let res;
    try {
      requests++;
      res = await fetch(url, init);
    } catch (err) {
      if (attempt >= maxTries) throw err;
      await sleep(1000 * 2 ** (attempt - 1));
      continue;
    }
    if (res.status === 429) tooMany++;
    if ((res.status === 429 || res.status >= 500) && attempt < maxTries) {
      const retryAfter = Number(res.headers.get('retry-after'));
      await res.body?.cancel();
      await sleep(retryAfter > 0 ? retryAfter * 1000 : 1000 * 2 ** (attempt - 1));
      continue;
    }
    return res;
  }
}

async function generate(row) {
  const submitted = await fetchWithRetry(`${baseUrl}/creations`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ prompt: row.prompt, model: row.model || 'sdxl' }),
  });
  if (submitted.status !== 202) throw new Error(`submit: ${submitted.status} ${await submitted.text()}`);
  let creation = await submitted.json();
  while (creation.status !== 'succeeded' && creation.status !== 'failed') {
    await sleep(pollMs);
    const polled = await fetchWithRetry(`${baseUrl}/creations/${creation.id}`, { headers });
    if (polled.status !== 200) throw new Error(`poll: ${polled.status} ${await polled.text()}`);
    creation = await polled.json();
  }
  if (creation.status === 'failed') throw new Error(creation.error);
  for (const [n, image] of creation.images.entries()) {
    const file = await fetch(image.url);
    await writeFile(`${outDir}/${row.id}-${n}.png`, Buffer.from(await file.arrayBuffer()));
  }
}

const started = Date.now();
await mkdir(outDir, { recursive: true });
const rows = parse(await readFile(args.csv), { columns: true });
const limit = pLimit(concurrency);
const outcomes = await Promise.allSettled(rows.map((row) => limit(() => generate(row))));
const failed = outcomes.filter((o) => o.status === 'rejected');
console.log(
  JSON.stringify({
    rows: rows.length,
    succeeded: outcomes.length - failed.length,
    failed: failed.length,
    firstError: failed[0]?.reason?.message,
    requests,
    tooMany,
    seconds: (Date.now() - started) / 1000,
  }),
);
