import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { loadApiKey } from '../../src/config/api-key';
import { simulatorCommand, simulatorUse } from '../../src/cli/commands/simulator';
import { loadServiceConfig } from '../../src/config/service-config';
import { DEMO_API_KEY } from '../../src/simulator';

/**
 * `imagebatch simulator` says how to use it: the key it accepts (its own demo key, only with its default accounts)
 * and the environment lines a worker or a run on this machine needs. The lines are checked by what reads them: the
 * worker's settings and key loaders, and the simulator itself, which must accept the key.
 */

/** A config key: the format of a real one, which the command must never print. */
const CONFIG_KEY = `img_live_ConfigKeyNeverPrinted${'0'.repeat(19)}`;

let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'imagebatch-simulator-cmd-'));
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Starts the command; resolves once it has printed its addresses, with what it printed and how to stop it (Ctrl-C). */
async function startSimulatorCommand(opts: {
  json?: boolean;
  config?: string;
}): Promise<{ text: string; stop: () => Promise<void> }> {
  const out: string[] = [];
  const controller = new AbortController();
  let onPrint!: () => void;
  const ready = new Promise<void>((resolve) => (onPrint = resolve));
  const running = simulatorCommand.run(
    { json: opts.json ?? false, ...(opts.config ? { config: opts.config } : {}) },
    {
      stdout: (text) => {
        out.push(text);
        onPrint();
      },
      stderr: () => undefined,
      stderrIsTTY: false,
      env: {},
      signal: controller.signal,
    },
  );
  await Promise.race([ready, running]);
  return {
    text: out.join(''),
    stop: async () => {
      controller.abort();
      await running;
    },
  };
}

/** What the command prints; it is stopped at once. */
async function printed(opts: { json?: boolean; config?: string }): Promise<string> {
  const { text, stop } = await startSimulatorCommand(opts);
  await stop();
  return text;
}

/** The variables of the `export NAME=value` lines. */
const exported = (text: string) =>
  Object.fromEntries([...text.matchAll(/^ {2}export (\w+)=(.*)$/gm)].map((m) => [m[1]!, m[2]!]));

/** The simulator answers the key on its models endpoint, as a worker's first call does. */
async function modelsStatus(env: Record<string, string>): Promise<number> {
  const config = loadServiceConfig(env);
  const res = await fetch(`${config.baseUrl}${config.modelsPath}`, {
    headers: { authorization: `Bearer ${loadApiKey(env)}` },
  });
  await res.body?.cancel();
  return res.status;
}

describe('imagebatch simulator prints its key and the lines to use it', () => {
  it('with its default accounts: the demo key, and export lines a worker reads and the simulator accepts', async () => {
    const { text, stop } = await startSimulatorCommand({});
    onTestFinished(stop);
    expect(text).toContain(`key:           ${DEMO_API_KEY}  (the simulator's own demo key, public; not a real one)`);
    const env = exported(text);
    expect(Object.keys(env)).toEqual(['IMAGEGEN_BASE_URL', 'IMAGEGEN_API_KEY']);
    expect(env.IMAGEGEN_BASE_URL).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/api\/public\/v1$/);
    expect(env.IMAGEGEN_API_KEY).toBe(DEMO_API_KEY);
    // As the README runs it from a clone (imagebatch is not on PATH there); local mode follows by default.
    expect(text).toMatch(/^ {2}npx imagebatch run examples\/demo-prompts\.csv --model flux-dev$/m);
    expect(text).not.toContain('--follow');
    expect(text).toContain('(a worker you start yourself, npx imagebatch worker, needs the same variables)');
    // The lines work: the worker's loaders take them (plain http to loopback), and the simulator took the key.
    expect(await modelsStatus(env)).toBe(200);
  });

  it('--json: the same fields', async () => {
    const json = JSON.parse(await printed({ json: true })) as Record<string, unknown>;
    expect(json).toMatchObject({
      apiKey: DEMO_API_KEY,
      env: { IMAGEGEN_BASE_URL: json.baseUrl, IMAGEGEN_API_KEY: DEMO_API_KEY },
      command: 'npx imagebatch run examples/demo-prompts.csv --model flux-dev',
    });
    expect(json.lines).toEqual([
      `export IMAGEGEN_BASE_URL=${String(json.baseUrl)}`,
      `export IMAGEGEN_API_KEY=${DEMO_API_KEY}`,
      json.command,
    ]);
    expect(Object.keys(json)).toEqual(expect.arrayContaining(['baseUrl', 'filesUrl', 'ledgerUrl']));
  });

  it("with accounts from --config: never prints a key of the config, a placeholder instead; the config's model", async () => {
    const config = path.join(dir, 'sim.json');
    await writeFile(
      config,
      JSON.stringify({
        models: [
          { id: 'flux-dev', name: 'Flux Dev', price_usd: 0.04 },
          { id: 'sdxl', name: 'SDXL', price_usd: 0.02 },
        ],
        accounts: [{ id: 'mine', models: ['sdxl'], keys: [{ id: 'k1', key: CONFIG_KEY }] }],
      }),
    );
    const text = await printed({ config });
    expect(text).not.toContain(CONFIG_KEY);
    expect(text).not.toContain(DEMO_API_KEY);
    expect(text).toContain('keys:          those of your config (not printed)');
    expect(text).toMatch(/^ {2}export IMAGEGEN_API_KEY=<a key of your config>$/m);
    expect(text).toMatch(/^ {2}npx imagebatch run \S+ --model sdxl$/m);
    const started = await startSimulatorCommand({ config, json: true });
    onTestFinished(started.stop);
    const json = JSON.parse(started.text) as Record<string, unknown>;
    expect(JSON.stringify(json)).not.toContain(CONFIG_KEY);
    expect(json.apiKey).toBeUndefined();
    expect(json.env).toEqual({ IMAGEGEN_BASE_URL: json.baseUrl });
    // The lines work once the key is put in: the simulator accepts a key of the config.
    expect(await modelsStatus({ ...(json.env as Record<string, string>), IMAGEGEN_API_KEY: CONFIG_KEY })).toBe(200);
  });

  it('a simulator on a host that is not loopback: the line that lets a worker use plain http to it', () => {
    const use = simulatorUse({ baseUrl: 'http://simulator:8787/api/public/v1', demoKey: DEMO_API_KEY, model: 'm' });
    expect(use.env.IMAGEGEN_ALLOW_INSECURE_HTTP).toBe('simulator');
    expect(() => loadServiceConfig(use.env)).not.toThrow();
    expect(() => loadServiceConfig({ IMAGEGEN_BASE_URL: use.env.IMAGEGEN_BASE_URL })).toThrow(/plain http/);
    expect(simulatorUse({ baseUrl: 'http://127.0.0.1:1/api/public/v1', model: 'm' }).env).toEqual({
      IMAGEGEN_BASE_URL: 'http://127.0.0.1:1/api/public/v1',
    });
  });
});
