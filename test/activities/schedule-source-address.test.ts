import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SCHEDULED_RUN_CANNOT_START } from '../../src/model';
import { activitiesFor, runActivity, tempDir } from './helpers';

/**
 * A schedule's URL source goes through the address guard of image downloads at fire time: a private, link-local or
 * loopback address not allowed fails the run at once (not retried), in the guard's words, and nothing is fetched.
 */
let dir: string;
let cleanup: () => Promise<void>;
let server: Server;
let port: number;
let served = 0;
beforeAll(async () => {
  ({ dir, cleanup } = await tempDir());
  server = createServer((_req, res) => {
    served += 1;
    res.writeHead(200, { 'content-type': 'text/csv' }).end('id,prompt\na,a red kite\n');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
});
afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
  await cleanup();
});

const prepare = (baseUrl: string, source: string) => {
  const { activities } = activitiesFor(baseUrl, {}, { outputRoot: dir });
  return runActivity(() =>
    activities.prepareScheduledRun({
      source,
      outDir: path.join(dir, 'out'),
      batchId: `run-${served}-${Date.now()}`,
      skipSucceeded: false,
      defaultModel: 'flux-dev',
      check: { defaultModel: 'flux-dev' },
    }),
  );
};

describe("a schedule's URL source at fire time", () => {
  it('is refused on a loopback address the guard does not allow, and never fetched', async () => {
    served = 0;
    // The service's host is a name: only that name is allowed, not the loopback address the source names.
    const { failure, value } = await prepare('http://localhost:9/v1', `http://127.0.0.1:${port}/prompts.csv`);
    expect(value).toBeUndefined();
    expect(failure).toMatchObject({ type: SCHEDULED_RUN_CANNOT_START, nonRetryable: true });
    expect(failure!.message).toContain('refused to download from 127.0.0.1: a loopback address');
    expect(failure!.message).toContain('IMAGEGEN_DOWNLOAD_ALLOW_HOSTS');
    expect(served).toBe(0);
  });

  it('is refused on a private address (no connection is tried)', async () => {
    const { failure } = await prepare('http://127.0.0.1:9/v1', 'http://10.0.0.5/prompts.csv');
    expect(failure).toMatchObject({ type: SCHEDULED_RUN_CANNOT_START, nonRetryable: true });
    expect(failure!.message).toContain('refused to download from 10.0.0.5: a private address');
  });

  it("is read on the service's own loopback host, as image downloads are (the simulator's files)", async () => {
    served = 0;
    const { value, failure } = await prepare('http://127.0.0.1:9/v1', `http://127.0.0.1:${port}/prompts.csv`);
    expect(failure).toBeUndefined();
    expect(value).toMatchObject({ rows: 1 });
    expect(served).toBe(1);
  });
});
