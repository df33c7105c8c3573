import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { localPaths } from '../../src/local/home';
import { ensureLocal, stopLocal } from '../../src/local/local';
import { pidAlive, stopPid } from '../../src/local/processes';

/**
 * Issue #30 item 8, leak 2: local mode started the Temporal dev server with the CLI's whole environment, the image
 * service key among it. Started here as `imagebatch run` starts it (ensureLocal, with the CLI's process.env), with a
 * stand-in worker that records what it was given. Linux only (/proc/<pid>/environ); elsewhere the unit test of
 * devServerEnv covers it.
 */

const FAKE_KEY = 'img_live_LocalServerEnvFake0123456789abcdefghijKL';
const SECRETS: Record<string, string> = {
  IMAGEGEN_API_KEY: FAKE_KEY,
  IMAGEBATCH_LEDGER: 'postgres://ledger:Hunter2LedgerPassword@127.0.0.1:1/ledger',
  IMAGEBATCH_PAYLOAD_KEY: 'cGF5bG9hZC1rZXktZm9yLXRoZS1sb2NhbC1lbnYtdGVzdA==',
  TEMPORAL_API_KEY: 'temporal-api-key-LocalServerEnvTest',
};

/** A worker stand-in: says it polls the server (worker.json), then waits to be stopped. */
const FAKE_WORKER = `
const fs = require('node:fs'), path = require('node:path');
const home = process.argv[process.argv.indexOf('--home') + 1];
const server = JSON.parse(fs.readFileSync(path.join(home, 'server.json'), 'utf8'));
const now = new Date().toISOString();
const state = { pid: process.pid, address: server.address, startedAt: now, beatAt: now, shutdownGraceMs: 1000,
  settings: { salt: '', hashes: {} } };
fs.writeFileSync(path.join(home, 'worker.json'), JSON.stringify(state));
setInterval(() => undefined, 1000);
`;

const environ = (pid: number) => readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');

let dir: string;
const saved: Record<string, string | undefined> = {};
beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'imagebatch-local-env-'));
  for (const [name, value] of Object.entries(SECRETS)) {
    saved[name] = process.env[name];
    process.env[name] = value;
  }
});
afterAll(async () => {
  for (const [name, value] of Object.entries(saved)) {
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
  }
  await rm(dir, { recursive: true, force: true });
});

describe.runIf(process.platform === 'linux')('local mode: the environment of each process', () => {
  it('the worker gets the key; the dev server gets neither it nor any other secret of the CLI', async () => {
    const paths = localPaths(path.join(dir, 'home'));
    let workerPid: number | undefined;
    try {
      const running = await ensureLocal({
        paths,
        need: 'worker',
        env: process.env,
        workerCommand: [process.execPath, '-e', FAKE_WORKER, '--'],
        log: () => undefined,
      });
      workerPid = running.worker?.pid;
      expect(workerPid).toBeDefined();
      // The control: the worker's environment, read the same way, holds the key.
      expect(environ(workerPid!)).toContain(`IMAGEGEN_API_KEY=${FAKE_KEY}`);
      const server = environ(running.server.pid);
      expect(server.some((v) => v.startsWith('PATH='))).toBe(true);
      const text = server.join('\n');
      for (const [name, value] of Object.entries(SECRETS)) {
        expect(text, name).not.toContain(value);
        expect(
          server.some((v) => v.startsWith(`${name}=`)),
          name,
        ).toBe(false);
      }
    } finally {
      if (workerPid !== undefined && pidAlive(workerPid)) await stopPid(workerPid, 2_000);
      await stopLocal(paths);
    }
  });
});
