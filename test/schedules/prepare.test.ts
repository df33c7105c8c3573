import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { prepareScheduledInput, recordSucceededIds } from '../../src/schedules/prepare';

let dir: string;
let server: Server;
let base: string;
const BODY = 'prompt,model\n"a fox, in snow",flux-dev\na lake at dawn,flux-dev\n';

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'imagebatch-prepare-'));
  server = createServer((req, res) => {
    if (req.url === '/prompts.csv') res.writeHead(200, { 'content-type': 'text/csv' }).end(BODY);
    else if (req.url === '/big.csv') res.writeHead(200).end('prompt\n' + 'x'.repeat(5000) + '\n');
    else res.writeHead(404).end('nope');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
  await rm(dir, { recursive: true, force: true });
});

describe('the input of a scheduled run', () => {
  it('fetches a URL source, and writes the rows with explicit ids', async () => {
    const runDir = path.join(dir, 'run1');
    const prepared = await prepareScheduledInput({
      source: `${base}/prompts.csv`,
      runDir,
      succeededIdsFile: path.join(dir, 'ids.txt'),
      skipSucceeded: true,
    });
    expect(prepared).toMatchObject({ rows: 2, skipped: 0, invalid: 0 });
    const text = await readFile(prepared.file, 'utf8');
    expect(text.split('\n')[0]).toBe('id,prompt,model,negative_prompt,width,height,seed,num_images');
    expect(text).toContain('row-1,"a fox, in snow",flux-dev');
    expect(await readFile(path.join(runDir, 'source.csv'), 'utf8')).toBe(BODY);
  });

  it('leaves out the ids that already succeeded', async () => {
    const ids = path.join(dir, 'ids2.txt');
    await recordSucceededIds(ids, ['row-1']);
    const file = path.join(dir, 'local.csv');
    await writeFile(file, BODY);
    const prepared = await prepareScheduledInput({
      source: file,
      runDir: path.join(dir, 'run2'),
      succeededIdsFile: ids,
      skipSucceeded: true,
    });
    expect(prepared).toMatchObject({ rows: 1, skipped: 1 });
    expect(await readFile(prepared.file, 'utf8')).not.toContain('a fox');
  });

  it('refuses a URL that answers an error, or a body over the size limit, with the reason', async () => {
    const common = { runDir: path.join(dir, 'run3'), succeededIdsFile: path.join(dir, 'x.txt'), skipSucceeded: false };
    await expect(prepareScheduledInput({ ...common, source: `${base}/missing.csv` })).rejects.toThrow(/HTTP 404/);
    await expect(prepareScheduledInput({ ...common, source: `${base}/big.csv`, maxBytes: 1000 })).rejects.toThrow(
      /over the limit of 1000/,
    );
  });
});
