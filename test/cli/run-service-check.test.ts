import { mkdtemp, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cli, describeRun } from './helpers';
import { startStack, type CliStack } from './stack';
import { closedPort } from '../helpers/closed-port';

/**
 * `run` makes the free checks on the worker before a batch starts (#30): with nothing listening at the worker's
 * IMAGEGEN_BASE_URL it stops with one line naming the setting and exit 1, and no batch is started.
 */
let stack: CliStack;
let env: Record<string, string>;
let file: string;

beforeAll(async () => {
  stack = await startStack({
    simulator: { seed: 3, limits: { minPollIntervalMs: 100, requestsPerSecond: 1000, burst: 1000 } },
    minPollIntervalMs: 150,
    workerEnv: { IMAGEGEN_BASE_URL: `http://127.0.0.1:${await closedPort()}/api/public/v1` },
  });
  file = path.join(stack.dir, 'prompts.csv');
  await writeFile(file, 'id,prompt,model\na,a lighthouse at dusk,flux-dev\nb,a fox in snow,flux-dev\n');
  env = { ...stack.cliEnv, IMAGEBATCH_HOME: await mkdtemp(path.join(stack.dir, 'home-')) };
}, 120_000);

afterAll(async () => {
  await stack?.stop();
});

describe('run before a batch starts', { timeout: 120_000 }, () => {
  it('nothing listening at IMAGEGEN_BASE_URL: one line naming it, exit 1, no batch started', async () => {
    const args = ['run', file, '--batch-id', 'unreachable', '--follow', '--out', path.join(stack.dir, 'out')];
    const r = await cli(args, { env, timeoutMs: 90_000 });
    expect(r.code, describeRun(args, r)).toBe(1);
    const errors = r.stderr.split('\n').filter((l) => l.startsWith('imagebatch: '));
    expect(errors, describeRun(args, r)).toHaveLength(1);
    expect(errors[0]).toMatch(/cannot be reached.*ECONNREFUSED.*fix IMAGEGEN_BASE_URL.*no batch was started/);
    expect(r.stderr).not.toMatch(/started batch/);
    const status = await cli(['status', 'unreachable'], { env });
    expect(status.code, describeRun(['status', 'unreachable'], status)).not.toBe(0);
  });
});
