import { existsSync } from 'node:fs';
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEV_SERVER_RETENTION_MS, DevServer } from '../../src/temporal/dev-server';
import { devServerBase } from '../../src/local/dev-server-base';
import { loadToolchainOverrides } from '../../src/config/toolchain-config';
import { temporalCliPath } from '../../src/temporal/toolchain';

/**
 * DevServer.start sets the default namespace's retention on purpose (the dev server's own is 24 h), and waits for the server to answer, and no longer than `startTimeoutMs`: a binary that never serves
 * ends start-up with a clear error and is stopped; one that exits says so with its code.
 */
let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'imagebatch-ready-'));
});
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

async function script(name: string, body: string): Promise<string> {
  const file = path.join(dir, name);
  await writeFile(file, `#!/bin/sh\n${body}\n`);
  await chmod(file, 0o755);
  return file;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('DevServer.start readiness', () => {
  it('gives up after startTimeoutMs on a server that never answers, and stops it', async () => {
    const pidFile = path.join(dir, 'silent.pid');
    const executable = await script('silent', `echo $$ > ${pidFile}\nexec sleep 600`);
    const t0 = Date.now();
    await expect(
      DevServer.start({ ...devServerBase(), executable, uiPort: false, startTimeoutMs: 2_000 }),
    ).rejects.toThrow(/did not answer on 127\.0\.0\.1:\d+ within 2000 ms/);
    const tookMs = Date.now() - t0;
    // The bound plus one probe and the stop: far below the 60 s default, so the option is what ended it.
    expect(tookMs).toBeLessThan(20_000);
    const pid = Number((await readFile(pidFile, 'utf8')).trim());
    expect(alive(pid)).toBe(false);
  }, 60_000);

  it('starts again a server whose port was taken meanwhile (seen in CI: its random HTTP API port)', async () => {
    // The first start loses the race for a port; the second is the real server.
    const tried = path.join(dir, 'tried');
    const real = temporalCliPath(loadToolchainOverrides().temporalCli);
    expect(real, 'the pinned Temporal CLI (node scripts/setup.mjs)').toBeDefined();
    const executable = await script(
      'port-taken',
      `if [ ! -f ${tried} ]; then touch ${tried}; echo "listen tcp 127.0.0.1:41985: bind: address already in use" >&2; exit 1; fi\nexec ${real!} "$@"`,
    );
    const server = await DevServer.start({ ...devServerBase(), executable, uiPort: false });
    try {
      const connection = await Connection.connect({ address: server.address });
      await connection.workflowService.getSystemInfo({});
      await connection.close();
    } finally {
      await server.stop();
    }
  }, 120_000);

  it('starts again a server that panicked during start-up, its port line buried under a long trace (seen in CI)', async () => {
    const tried = path.join(dir, 'tried-panic');
    const real = temporalCliPath(loadToolchainOverrides().temporalCli);
    expect(real, 'the pinned Temporal CLI (node scripts/setup.mjs)').toBeDefined();
    const trace = 'go.uber.org/dig.paramGroupedSlice.Build(...)\\n'.repeat(200);
    const executable = await script(
      'panics',
      `if [ ! -f ${tried} ]; then touch ${tried}; echo "panic: listen tcp 127.0.0.1:41986: bind: address already in use" >&2; printf '${trace}' >&2; exit 2; fi\nexec ${real!} "$@"`,
    );
    const server = await DevServer.start({ ...devServerBase(), executable, uiPort: false });
    try {
      const connection = await Connection.connect({ address: server.address });
      await connection.workflowService.getSystemInfo({});
      await connection.close();
    } finally {
      await server.stop();
    }
    expect(existsSync(tried)).toBe(true);
  }, 120_000);

  it('reports a server that exits during start-up with its exit code', async () => {
    const executable = await script('exits', 'echo "no such flag" >&2\nexit 3');
    await expect(
      DevServer.start({ ...devServerBase(), executable, uiPort: false, startTimeoutMs: 30_000 }),
    ).rejects.toThrow(/exited with code 3 during start-up: no such flag/);
  }, 60_000);
});

describe('DevServer.start retention', () => {
  it("sets the default namespace's workflow execution retention to DEV_SERVER_RETENTION_MS (7 days)", async () => {
    expect(DEV_SERVER_RETENTION_MS).toBe(7 * 24 * 3600 * 1000);
    const server = await DevServer.start({ ...devServerBase(), uiPort: false });
    try {
      const connection = await Connection.connect({ address: server.address });
      try {
        const { config } = await connection.workflowService.describeNamespace({ namespace: 'default' });
        expect(Number(config?.workflowExecutionRetentionTtl?.seconds)).toBe(DEV_SERVER_RETENTION_MS / 1000);
      } finally {
        await connection.close();
      }
    } finally {
      await server.stop();
    }
  }, 60_000);
});
