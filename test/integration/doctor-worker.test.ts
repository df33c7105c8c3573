import { mkdtemp, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { temporal } from '@temporalio/proto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { doctor } from '../../src/cli/commands/doctor';
import { DEMO_ACCOUNT_ID, DEMO_API_KEY, startSimulator, type Simulator } from '../../src/simulator';
import { createLocalEnv, simulatorWorker, useTestEnv } from '../helpers/temporal';

/**
 * `imagebatch doctor` as it runs by default: the CLI starts `doctorWorkflow`, a worker runs the checks with its own
 * settings and key (the CLI has neither), and the CLI prints the report. The key stays in the worker: not in the
 * output, not in the workflow's input or result.
 */
const env = useTestEnv(() => createLocalEnv());
let sim: Simulator;
let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'imagebatch-doctor-worker-'));
  sim = await startSimulator({
    generation: { queuedMs: { minMs: 10, maxMs: 20 }, runningMs: { minMs: 50, maxMs: 100 } },
    limits: { minPollIntervalMs: 200, requestsPerSecond: 100, burst: 100 },
  });
});
afterAll(async () => {
  await sim?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

async function viaWorker(options: { spendOne?: boolean; model?: string; out?: string } = {}) {
  const { worker, taskQueue } = await simulatorWorker(env, { baseUrl: sim.baseUrl, outputRoot: dir, prefix: 'doctor' });
  let stdout = '';
  const stderr: string[] = [];
  const outcome = await worker.runUntil(
    doctor({
      ...options,
      env: {}, // the CLI's own environment holds no key: the worker's is used
      temporal: { client: env().client, taskQueue, namespace: 'default' },
      write: (t) => (stdout += t),
      warn: (l) => stderr.push(l),
    }),
  );
  expect(stdout + stderr.join('\n')).not.toContain(DEMO_API_KEY.slice(-40));
  if (outcome.workflowId) {
    // Neither the workflow's input nor its result (the report) holds the key.
    const history = await env().client.workflow.getHandle(outcome.workflowId).fetchHistory();
    const bytes = Buffer.from(temporal.api.history.v1.History.encode(history).finish()).toString('latin1');
    expect(bytes).toContain('doctorChecks');
    expect(bytes).not.toContain(DEMO_API_KEY.slice(-40));
  }
  return { ...outcome, stdout, stderr, taskQueue };
}

describe('doctor through a worker', () => {
  it('runs the checks on the worker, with its settings and key (exit 0)', async () => {
    const { exitCode, stdout, report, workflowId } = await viaWorker();
    expect(exitCode, stdout).toBe(0);
    expect(workflowId).toMatch(/^doctor\//);
    expect(report?.ranOn).toMatch(/^worker \d+@/);
    expect(stdout).toMatch(/^imagebatch doctor: checks run by worker \d+@\S+, with its settings and key/);
    expect(stdout).toMatch(/\nauthentication\s+ok\s+the key was accepted with Authorization: Bearer/);
    expect(stdout).toMatch(/\ncreation path\s+ok\s+GET \/creations\/<made-up id> answered the documented 404/);
  });

  it('reports a disabled account found by the worker (exit 1)', async () => {
    sim.setAccountDisabled(DEMO_ACCOUNT_ID, true);
    try {
      const { exitCode, stdout } = await viaWorker();
      expect(exitCode).toBe(1);
      expect(stdout).toMatch(/\nauthentication\s+FAIL\s+HTTP 403 account_disabled/);
      expect(stdout).toContain('doctor: 1 check(s) FAILED: a batch would not work (exit 1)');
    } finally {
      sim.setAccountDisabled(DEMO_ACCOUNT_ID, false);
    }
  });

  it('--spend-one pays once on the worker and saves the image there; a re-run pays nothing again', async () => {
    const key = 'imagebatch-doctor/spend-one/sdxl';
    const charged = () => sim.charges.byIdempotencyKey().filter((s) => s.idempotencyKey === key);
    const first = await viaWorker({ spendOne: true, model: 'sdxl', out: 'doctor-out' });
    expect(first.exitCode, first.stdout).toBe(0);
    expect(first.stdout).toMatch(/\nsubmission\s+ok\s+HTTP 202, creation \S+, key imagebatch-doctor\/spend-one\/sdxl/);
    const saved = first.report?.spendOne?.saved?.[0] ?? '';
    expect(saved.startsWith(path.join(dir, 'doctor-out'))).toBe(true);
    expect((await stat(saved)).size).toBeGreaterThan(0);
    expect(charged().map((s) => s.chargedUsd)).toEqual([0.02]);

    const again = await viaWorker({ spendOne: true, model: 'sdxl', out: 'doctor-out' });
    expect(again.exitCode, again.stdout).toBe(0);
    expect(again.stdout).toMatch(/\nsubmission\s+ok\s+not sent: /);
    expect(again.report?.spendOne?.creationId).toBe(first.report?.spendOne?.creationId);
    expect(charged().map((s) => s.chargedUsd)).toEqual([0.02]);
  });

  it('says within seconds when no worker polls the task queue (exit 1)', async () => {
    const stderr: string[] = [];
    const { exitCode } = await doctor({
      env: {},
      temporal: { client: env().client, taskQueue: 'doctor-nobody-polls', namespace: 'default' },
      write: () => undefined,
      warn: (l) => stderr.push(l),
    });
    expect(exitCode).toBe(1);
    expect(stderr).toEqual([
      'imagebatch doctor: no worker polls task queue doctor-nobody-polls (namespace default): start one with ' +
        '`imagebatch worker` (doctor checks its settings and key), or run `imagebatch doctor --local` with IMAGEGEN_* set here',
    ]);
  });
});
