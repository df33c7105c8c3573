import { readFile, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { doctorImageSaver } from '../../src/activities/doctor';
import { doctor } from '../../src/cli/commands/doctor';
import { defaultServiceConfig } from '../../src/config/service-config';
import { runDoctorChecks, type DoctorReport } from '../../src/doctor';
import { DEMO_API_KEY, startSimulator, type Simulator, type SimulatorConfigInput } from '../../src/simulator';

/**
 * Doctor's paid test proves the key: it says before it spends that the key goes twice (at most one extra charge), sends
 * it a second time once the first answer is known, and says PASS when the same creation came back, or FAIL naming the
 * carrier, the second creation and its charge. Its proof is recorded only when the key was honoured.
 */
let dir: string;
let sim: Simulator | undefined;
beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'imagebatch-doctor-key-'));
});
afterEach(async () => {
  await sim?.close();
  sim = undefined;
});
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

const KEY = 'imagebatch-doctor/spend-one/flux-schnell';
const MODEL = 'flux-schnell';

async function startSim(idempotency?: SimulatorConfigInput['idempotency']): Promise<Simulator> {
  return startSimulator({
    ...(idempotency ? { idempotency } : {}),
    generation: { queuedMs: { minMs: 10, maxMs: 20 }, runningMs: { minMs: 50, maxMs: 100 } },
    limits: { minPollIntervalMs: 200, requestsPerSecond: 100, burst: 100 },
  });
}

/** The paid test on this process, as a worker's activity runs it: its report, and the proofs it recorded. */
async function paidTest(s: Simulator, out: string): Promise<{ report: DoctorReport; proofs: string[] }> {
  const config = defaultServiceConfig({ baseUrl: s.baseUrl, minPollIntervalMs: 200 });
  const proofs: string[] = [];
  const report = await runDoctorChecks(
    {
      config,
      apiKey: () => DEMO_API_KEY,
      outputRoot: dir,
      saveImages: doctorImageSaver({ config, outputRoot: dir, now: Date.now }),
      proveService: async (creationId) => void proofs.push(creationId),
    },
    { spendOne: { model: MODEL, testId: 'spend-one', outDir: out, maxWaitMs: 60_000 } },
  );
  return { report, proofs };
}

const lineOf = (report: DoctorReport, name: string) => report.checks.find((c) => c.name === name);
const charges = (s: Simulator) => s.charges.byIdempotencyKey().find((k) => k.idempotencyKey === KEY)?.creationIds ?? [];

describe('doctor --spend-one proves the key', () => {
  it('a service that ignores the key: FAIL naming the carrier, the second creation and its charge; no proof', async () => {
    sim = await startSim({ header: null });
    const { report, proofs } = await paidTest(sim, 'ignored');
    const creations = charges(sim);
    expect(creations).toHaveLength(2);
    const line = lineOf(report, 'key honoured');
    expect(line).toMatchObject({
      result: 'FAIL',
      found:
        'the service did not honour the idempotency key at header Idempotency-Key: every retry may pay twice; ' +
        `the check paid a second creation ${creations[1]} ($0.01)`,
    });
    expect(line?.hint).toContain('IMAGEGEN_IDEMPOTENCY_HEADER or IMAGEGEN_IDEMPOTENCY_FIELD');
    expect(proofs).toEqual([]);
    expect(lineOf(report, 'proof')).toMatchObject({
      result: 'warn',
      found: expect.stringContaining('not proven') as unknown,
    });
    // Run again with the same record: the check is read from it, never sent a third time.
    const again = await paidTest(sim, 'ignored');
    expect(charges(sim)).toHaveLength(2);
    expect(lineOf(again.report, 'key honoured')?.result).toBe('FAIL');
    const record = JSON.parse(await readFile(path.join(dir, 'ignored', 'doctor-spend-one.json'), 'utf8')) as Record<
      string,
      { check?: { result?: string; creationId?: string } }
    >;
    expect(record[KEY]?.check).toMatchObject({ result: 'not_honoured', creationId: creations[1] });
  });

  it('a service that honours it: PASS, one charge, and the proof recorded', async () => {
    sim = await startSim();
    const { report, proofs } = await paidTest(sim, 'honoured');
    const creations = charges(sim);
    expect(creations).toHaveLength(1);
    expect(lineOf(report, 'key honoured')).toEqual({
      name: 'key honoured',
      result: 'ok',
      found: `the key at header Idempotency-Key was honoured: the same creation came back (${creations[0]})`,
    });
    expect(proofs).toEqual([creations[0]]);
  });

  it('says before it spends that its key goes twice, at most one extra charge', async () => {
    sim = await startSim({ header: null });
    const said: string[] = [];
    const { exitCode } = await doctor({
      local: true,
      outputRoot: dir,
      spendOne: true,
      model: MODEL,
      out: 'said',
      env: { IMAGEGEN_BASE_URL: sim.baseUrl, IMAGEGEN_API_KEY: DEMO_API_KEY, IMAGEGEN_MIN_POLL_INTERVAL_MS: '200' },
      write: (t) => void said.push(t),
      warn: (l) => void said.push(l),
    });
    expect(said[0]).toBe(
      `imagebatch doctor: --spend-one pays for one creation of ${MODEL}; once it is accepted, its key is sent a ` +
        'second time to prove the service honours it (at most one extra charge)',
    );
    expect(exitCode).toBe(1);
    expect(said.join('')).toMatch(/key honoured\s+FAIL\s+the service did not honour the idempotency key at header/);
  });
});
