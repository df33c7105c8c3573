import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { simulator } from '../../src/cli/commands/simulator';
import { DEMO_API_KEY, hashApiKey, resolveConfig, SimulatorConfigError, startSimulator } from '../../src/simulator';
import { call, expectChargesConsistent, PROMPT, startTestSim, submit } from './helpers';

describe('simulator config', () => {
  it('has the defaults of contract-defaults.md', () => {
    const cfg = resolveConfig();
    expect(cfg.limits).toEqual({
      requestsPerSecond: 10,
      burst: 10,
      minPollIntervalMs: 2000,
      accountConcurrency: 8,
      modelCapacity: null,
    });
    expect(cfg.accounts).toEqual([
      {
        id: 'acct_demo',
        disabled: false,
        walletUsd: 100,
        models: ['flux-dev', 'flux-schnell', 'sdxl'],
        keys: [{ id: 'key_demo', sha256: hashApiKey(DEMO_API_KEY), revoked: false, monthlyBudgetUsd: null }],
      },
    ]);
    expect(cfg.idempotency).toEqual({
      variant: 'accepted-only',
      ttlMs: 86_400_000,
      maxEntries: 100_000,
      header: 'Idempotency-Key',
    });
    expect(cfg.statusNaming).toBe('default');
  });

  it('hashes plaintext keys at load and keeps no plaintext', () => {
    const cfg = resolveConfig({ accounts: [{ id: 'a', keys: [{ id: 'k', key: DEMO_API_KEY }] }] });
    expect(JSON.stringify(cfg)).not.toContain(DEMO_API_KEY);
    expect(cfg.accounts[0]?.keys[0]?.sha256).toBe(hashApiKey(DEMO_API_KEY));
  });

  it('names every wrong field', () => {
    const bad = () =>
      resolveConfig({
        limits: { burst: 0 },
        accounts: [{ id: 'a', models: ['nope'], keys: [{ id: 'k', key: 'short' }] }],
        idempotency: { variant: 'sometimes' as 'all-judged' },
        extra: 1,
      } as never);
    expect(bad).toThrow(SimulatorConfigError);
    try {
      bad();
    } catch (err) {
      const text = (err as SimulatorConfigError).issues.join('\n');
      expect(text).toContain('limits.burst');
      expect(text).toContain('accounts.0.keys.0.key');
      expect(text).toContain('idempotency.variant');
      expect(text).toMatch(/extra/);
    }
    expect(() =>
      resolveConfig({ accounts: [{ id: 'a', models: ['nope'], keys: [{ id: 'k', key: DEMO_API_KEY }] }] }),
    ).toThrow(/accounts\.0\.models\.0: unknown model "nope"/);
    expect(() => resolveConfig({ faults: { probabilities: { fail_no_image: 0.7, fail_timed_out: 0.7 } } })).toThrow(
      /faults\.probabilities/,
    );
  });

  it('accepts a key given only by its sha256', async () => {
    const sim = await startSimulator({
      accounts: [{ id: 'a', keys: [{ id: 'k', sha256: hashApiKey(DEMO_API_KEY) }] }],
    });
    try {
      expect((await call(sim, 'GET', '/models')).status).toBe(200);
    } finally {
      await sim.close();
    }
  });

  it('the default config serves the demo key on 127.0.0.1 with the API prefix', async () => {
    const sim = await startSimulator();
    try {
      expect(sim.baseUrl).toBe(`http://127.0.0.1:${sim.port}/api/public/v1`);
      expect(sim.filesUrl).toBe(`http://127.0.0.1:${sim.filesPort}`);
      expect((await call(sim, 'GET', '/models')).status).toBe(200);
    } finally {
      await sim.close();
    }
  });
});

describe('imagebatch simulator command', () => {
  it('starts from a JSON config file, with port overrides', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'sim-'));
    try {
      const file = path.join(dir, 'sim.json');
      await writeFile(file, JSON.stringify({ statusNaming: 'alternate', limits: { accountConcurrency: 2 } }));
      const started = await simulator({ configFile: file, port: 0 });
      try {
        expect(started.baseUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/api\/public\/v1$/);
        const reply = await submit(started.simulator, { prompt: PROMPT, model: 'flux-dev' });
        expect(reply.body.status).toBe('pending');
        const ledger = await call(started.simulator, 'GET', started.ledgerUrl, { key: null });
        expect(ledger.body.entries).toHaveLength(1);
      } finally {
        await started.simulator.close();
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('says which file and which field are wrong', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'sim-'));
    try {
      const file = path.join(dir, 'bad.json');
      await writeFile(file, JSON.stringify({ limits: { requestsPerSecond: 'fast' } }));
      await expect(simulator({ configFile: file })).rejects.toThrow(`${file}: limits.requestsPerSecond`);
      await writeFile(file, '{ not json');
      await expect(simulator({ configFile: file })).rejects.toThrow(`simulator config ${file} is not valid JSON`);
      await expect(simulator({ configFile: path.join(dir, 'missing.json') })).rejects.toThrow(
        /cannot read simulator config/,
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('bounded memory', () => {
  it('old creations and idempotency entries expire by count and by TTL', async () => {
    const { sim, clock } = await startTestSim({
      creations: { maxEntries: 50, ttlMs: 3600_000 },
      idempotency: { maxEntries: 40, ttlMs: 3600_000 },
      limits: { accountConcurrency: null },
    });
    try {
      for (let i = 0; i < 300; i++) {
        expect(
          (await submit(sim, { prompt: `${PROMPT} ${i}`, model: 'flux-schnell' }, { idempotencyKey: `k${i}` })).status,
        ).toBe(202);
        clock.advance(100);
      }
      const stats = sim.stats();
      expect(stats.creations).toBeLessThanOrEqual(50 + stats.inFlight);
      expect(stats.idempotencyEntries).toBeLessThanOrEqual(40);
      clock.advance(2 * 3600_000);
      expect(sim.stats()).toMatchObject({ creations: 0, inFlight: 0, idempotencyEntries: 0 });
      expectChargesConsistent(sim);
    } finally {
      await sim.close();
    }
  });
});
