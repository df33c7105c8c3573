import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_API_KEY } from '../../src/simulator';
import { baseEnv, cli, describeRun, ensureDistIsFresh } from './helpers';

/**
 * Issue 42, point 2: a misspelt `IMAGEGEN_*` variable was ignored in silence (`validate` read the catalog and exited
 * 0; the worker ran without the setting). Now the command and the worker refuse to start, in one line that names the
 * variable and the setting it is a typo of, with exit 2, before anything reaches the service or the ledger store.
 */

let dir: string;
let server: Server;
let requests = 0;
let baseUrl: string;

beforeAll(async () => {
  await ensureDistIsFresh();
  dir = await mkdtemp(path.join(os.tmpdir(), 'imagebatch-unknown-settings-'));
  // The service's catalog, counting every request it gets.
  server = createServer((_req, res) => {
    requests += 1;
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ data: [{ id: 'flux-dev' }] }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/public/v1`;
});

afterAll(async () => {
  if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  if (dir) await rm(dir, { recursive: true, force: true });
});

const REFUSAL =
  'imagebatch: IMAGEGEN_IDEMPOTENCY_HEDER is not a setting of imagebatch (did you mean IMAGEGEN_IDEMPOTENCY_HEADER?): ' +
  'unset it or correct its name\n';

describe('a misspelt variable', { timeout: 60_000 }, () => {
  it('validate exits 2 naming it and the setting meant, and never reaches the service', async () => {
    const file = path.join(dir, 'prompts.csv');
    await writeFile(file, 'prompt\na red fox in fresh snow\n');
    const args = ['validate', file, '--model', 'flux-dev'];
    const env = (extra: Record<string, string>) =>
      baseEnv({ IMAGEGEN_BASE_URL: baseUrl, IMAGEGEN_API_KEY: DEMO_API_KEY, ...extra });

    requests = 0;
    const refused = await cli(args, { env: env({ IMAGEGEN_IDEMPOTENCY_HEDER: 'X-Request-Key' }) });
    expect(refused.code, describeRun(args, refused)).toBe(2);
    expect(refused.stderr).toBe(REFUSAL);
    expect(refused.stdout).toBe('');
    expect(requests).toBe(0);

    // Spelt right, the same command reads the catalog: the refusal above is what kept it from the service.
    const spelt = await cli(args, { env: env({ IMAGEGEN_IDEMPOTENCY_HEADER: 'X-Request-Key' }) });
    expect(spelt.code, describeRun(args, spelt)).toBe(0);
    expect(requests).toBe(1);
  });

  it('the worker exits 2 naming it, before it opens its ledger store or connects', async () => {
    const ledger = path.join(dir, 'ledger.sqlite');
    const env = baseEnv({
      TEMPORAL_ADDRESS: '127.0.0.1:9', // nothing listens here
      IMAGEGEN_BASE_URL: baseUrl,
      IMAGEGEN_API_KEY: DEMO_API_KEY,
      IMAGEBATCH_LEDGER: ledger,
      IMAGEGEN_IDEMPOTENCY_HEDER: 'X-Request-Key',
    });
    const r = await cli(['worker'], { env });
    expect(r.code, describeRun(['worker'], r)).toBe(2);
    expect(r.stderr).toBe(REFUSAL);
    expect(existsSync(ledger)).toBe(false);
  });
});
