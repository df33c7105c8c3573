import { mkdtemp, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cli, describeRun } from './helpers';
import { chargedKeys, startStack, type CliStack } from './stack';

/**
 * `--spend-cap` when no price is known for a model (#15: the cap is refused at start, exit 3, naming the model and
 * the ways to give a price), through the `imagebatch` command: the simulator shows no price anywhere (`pricing:
 * hidden`), so the catalog the worker reads has none. `run` and `schedule create` (a local file) are refused before
 * anything starts, and nothing is charged; the same run with `--price` starts.
 */
let stack: CliStack;
let file: string;
let env: Record<string, string>;

beforeAll(async () => {
  stack = await startStack({
    simulator: {
      seed: 7,
      pricing: { fields: 'hidden' },
      generation: { queuedMs: { minMs: 10, maxMs: 30 }, runningMs: { minMs: 50, maxMs: 100 } },
      limits: { minPollIntervalMs: 100, requestsPerSecond: 1000, burst: 1000, accountConcurrency: null },
      safety: { genericDeclineProbability: 0 },
    },
    minPollIntervalMs: 150,
  });
  file = path.join(stack.dir, 'prompts.csv');
  await writeFile(file, 'id,prompt,model\na,a lighthouse at dusk,flux-dev\nb,a fox in snow,flux-dev\n');
  // TEMPORAL_ADDRESS is the stack's server (never local mode); IMAGEBATCH_HOME a folder of the test's own.
  env = { ...stack.cliEnv, IMAGEBATCH_HOME: await mkdtemp(path.join(stack.dir, 'home-')) };
}, 120_000);

afterAll(async () => {
  await stack?.stop();
});

const nothingCharged = () => expect(stack.sim.charges.entries().filter((e) => e.kind === 'charge')).toEqual([]);

describe('--spend-cap with a model of unknown price', { timeout: 120_000 }, () => {
  it('run: exit 3 naming the model and --price, nothing started or charged; with --price it starts', async () => {
    const out = path.join(stack.dir, 'out-run');
    const args = ['run', file, '--batch-id', 'capless', '--out', out, '--spend-cap', '1'];
    // Its folder is one the schedule may read (IMAGEBATCH_SCHEDULE_SOURCES): the price is what refuses it.
    const refused = await cli(args, { env: { ...env, IMAGEBATCH_SCHEDULE_SOURCES: stack.dir }, timeoutMs: 60_000 });
    expect(refused.code, describeRun(args, refused)).toBe(3);
    expect(refused.stderr).toContain('flux-dev');
    expect(refused.stderr).toContain('--price flux-dev=<usd per image>');
    expect(refused.stderr).toContain('nothing was started');
    nothingCharged();
    const status = await cli(['status', 'capless'], { env });
    expect(status.code, describeRun(['status', 'capless'], status)).toBe(1);

    // The control: the same run, given the price, starts and is charged (so the refusal above was the price's).
    const priced = [...args, '--price', 'flux-dev=0.04', '--follow', '--json'];
    const ran = await cli(priced, { env, timeoutMs: 60_000 });
    expect(ran.code, describeRun(priced, ran)).toBe(0);
    expect(JSON.parse(ran.stdout)).toMatchObject({ status: 'completed', counts: { succeeded: 2 }, spendCapUsd: 1 });
    expect(chargedKeys(stack.sim, 'capless')).toHaveLength(2);
  });

  it('schedule create with a local file: exit 3 naming the model and --price, no schedule, nothing charged', async () => {
    const chargesBefore = stack.sim.charges.entries().filter((e) => e.kind === 'charge').length;
    const args = ['schedule', 'create', 'nightly', '--file', file, '--every', '1h', '--spend-cap', '1'];
    args.push('--out', path.join(stack.dir, 'out-schedule'));
    // Its folder is one the schedule may read (IMAGEBATCH_SCHEDULE_SOURCES): the price is what refuses it.
    const refused = await cli(args, { env: { ...env, IMAGEBATCH_SCHEDULE_SOURCES: stack.dir }, timeoutMs: 60_000 });
    expect(refused.code, describeRun(args, refused)).toBe(3);
    expect(refused.stderr).toContain('flux-dev');
    expect(refused.stderr).toContain('--price flux-dev=<usd per image>');
    const described = await cli(['schedule', 'describe', 'nightly'], { env });
    expect(described.code, describeRun(['schedule', 'describe', 'nightly'], described)).not.toBe(0);
    expect(stack.sim.charges.entries().filter((e) => e.kind === 'charge')).toHaveLength(chargesBefore);
  });
});
