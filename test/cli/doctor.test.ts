import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type * as WorkerModule from '@temporalio/worker';
import { doctor, type DoctorCommandOptions } from '../../src/cli/commands/doctor';
import { main } from '../../src/cli/main';
import {
  DEMO_ACCOUNT_ID,
  DEMO_API_KEY,
  PREDICTION_SERVICE_PROFILE,
  startSimulator,
  type Simulator,
} from '../../src/simulator';

/**
 * `imagebatch doctor --local` against the simulator: each way a service can be set up wrong gives its exit code and
 * the table line that names it; `--spend-one` pays once, and a re-run pays nothing again. The key never shows.
 */

// main() installs the SDK runtime, which the test set-up has installed already.
vi.mock('@temporalio/worker', async (importOriginal) => {
  const real = await importOriginal<typeof WorkerModule>();
  return { ...real, Runtime: { install: () => undefined, instance: () => real.Runtime.instance() } };
});

const UNKNOWN_KEY = `img_live_${'Q'.repeat(40)}`;
let sim: Simulator;
let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'imagebatch-doctor-'));
  sim = await startSimulator({
    generation: { queuedMs: { minMs: 10, maxMs: 20 }, runningMs: { minMs: 50, maxMs: 100 } },
    limits: { minPollIntervalMs: 200, requestsPerSecond: 100, burst: 100 },
  });
});
afterAll(async () => {
  await sim?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

function envFor(s: Simulator, extra: Record<string, string> = {}): Record<string, string> {
  return {
    IMAGEGEN_BASE_URL: s.baseUrl,
    IMAGEGEN_API_KEY: DEMO_API_KEY,
    IMAGEGEN_MIN_POLL_INTERVAL_MS: '200',
    ...extra,
  };
}

async function run(options: Partial<DoctorCommandOptions> & { env: Record<string, string> }) {
  let stdout = '';
  const stderr: string[] = [];
  const { exitCode, report } = await doctor({
    local: true,
    outputRoot: dir,
    write: (t) => (stdout += t),
    warn: (l) => stderr.push(l),
    ...options,
  });
  // Never the key, nor its token, whatever happened.
  for (const text of [stdout, stderr.join('\n'), JSON.stringify(report ?? {})]) {
    expect(text).not.toContain(DEMO_API_KEY.slice(-40));
    expect(text).not.toContain(UNKNOWN_KEY.slice(-40));
  }
  return { exitCode, report, stdout, stderr };
}

/** The table line of a check: its name, its result, what it found, as `name ~ result ~ found`. */
function line(stdout: string, name: string): string {
  const found = stdout.split('\n').find((l) => l.startsWith(`${name}  `));
  if (found === undefined) throw new Error(`no line "${name}" in:\n${stdout}`);
  return found.replace(/\s{2,}/g, ' ~ ');
}

describe('doctor --local', () => {
  it('passes on a healthy service, with a fingerprint and never the key', async () => {
    const { exitCode, stdout } = await run({ env: envFor(sim) });
    expect(exitCode, stdout).toBe(0);
    expect(line(stdout, 'api key')).toMatch(
      /^api key ~ ok ~ well-formed: a 4-character prefix.*fingerprint [0-9a-f]{12}/,
    );
    expect(line(stdout, 'base URL')).toMatch(/^base URL ~ ok ~ reachable: GET .*\/models answered HTTP 200/);
    expect(line(stdout, 'authentication')).toMatch(/ok ~ the key was accepted with Authorization: Bearer/);
    expect(line(stdout, 'models')).toContain('flux-dev $0.04');
    expect(line(stdout, 'prices')).toMatch(/^prices ~ ok ~ every model has a price/);
    expect(line(stdout, 'creation path')).toMatch(
      /ok ~ GET \/creations\/<made-up id> answered the documented 404 ERR_NOT_FOUND/,
    );
    expect(line(stdout, 'image host')).toMatch(/^image host ~ guess ~ not knowable without a creation/);
    expect(stdout).toContain('doctor: no problem found');
  });

  it('fails on a malformed key, saying what is wrong without showing it (exit 1)', async () => {
    const { exitCode, stdout } = await run({ env: envFor(sim, { IMAGEGEN_API_KEY: 'img_live_tooShort123' }) });
    expect(exitCode).toBe(1);
    expect(line(stdout, 'api key')).toMatch(
      /^api key ~ FAIL ~ the token after "live_" .* has 11 characters; 40 expected/,
    );
    expect(stdout).not.toContain('tooShort123');
    expect(line(stdout, 'authentication')).toMatch(/skipped/);
  });

  it('fails on a well-formed key the service does not know: 401 api_key_invalid (exit 1)', async () => {
    const { exitCode, stdout } = await run({ env: envFor(sim, { IMAGEGEN_API_KEY: UNKNOWN_KEY }) });
    expect(exitCode).toBe(1);
    expect(line(stdout, 'api key')).toMatch(/^api key ~ ok/);
    expect(line(stdout, 'authentication')).toMatch(
      /^authentication ~ FAIL ~ HTTP 401 api_key_invalid: the service does not recognize this key/,
    );
  });

  it('fails on a disabled account: 403 account_disabled (exit 1)', async () => {
    sim.setAccountDisabled(DEMO_ACCOUNT_ID, true);
    try {
      const { exitCode, stdout } = await run({ env: envFor(sim) });
      expect(exitCode).toBe(1);
      expect(line(stdout, 'authentication')).toMatch(
        /^authentication ~ FAIL ~ HTTP 403 account_disabled: the key is valid but the account is disabled/,
      );
    } finally {
      sim.setAccountDisabled(DEMO_ACCOUNT_ID, false);
    }
  });

  it('fails on a wrong base path: the catalog is not there (exit 1)', async () => {
    const { exitCode, stdout } = await run({
      env: envFor(sim, { IMAGEGEN_BASE_URL: sim.baseUrl.replace(/\/v1$/, '/v2') }),
    });
    expect(exitCode).toBe(1);
    expect(line(stdout, 'base URL')).toMatch(
      /^base URL ~ FAIL ~ reachable, but GET .*\/api\/public\/v2\/models answered HTTP 404/,
    );
    expect(line(stdout, 'base URL')).toContain(
      "(the interface's {base_url} ends in /api/public/v1; this one does not)",
    );
  });

  it('fails on a creation path that names no endpoint, though the service answers it with ERR_NOT_FOUND (exit 1)', async () => {
    const { exitCode, stdout } = await run({ env: envFor(sim, { IMAGEGEN_CREATION_PATH: '/jobs/{id}' }) });
    expect(exitCode, stdout).toBe(1);
    expect(line(stdout, 'creation path')).toMatch(
      /^creation path ~ FAIL ~ GET \/jobs\/<made-up id> answered 404 ERR_NOT_FOUND "No such endpoint\.", exactly as an endpoint that does not exist does/,
    );
    expect(stdout).toContain('-> set IMAGEGEN_CREATION_PATH');
  });

  it('--spend-one on such a path: the paid creation is not found there, and the check stays failed (exit 1)', async () => {
    const { exitCode, stdout } = await run({
      env: envFor(sim, { IMAGEGEN_CREATION_PATH: '/jobs/{id}' }),
      spendOne: true,
      model: 'flux-schnell',
      out: 'wrong-path',
    });
    expect(exitCode, stdout).toBe(1);
    // Only a real creation could settle it, so one was submitted; reading it at /jobs/{id} failed.
    expect(line(stdout, 'submission')).toMatch(/^submission ~ ok ~ HTTP 202, creation \S+/);
    expect(line(stdout, 'poll')).toMatch(/^poll ~ FAIL ~ /);
    expect(line(stdout, 'creation path')).toMatch(/^creation path ~ FAIL ~ /);
  });

  it('passes on a catalog without prices, guessing "unknown" and saying what to do (exit 0)', async () => {
    const hidden = await startSimulator({ pricing: { fields: 'hidden' } });
    try {
      const { exitCode, stdout } = await run({ env: envFor(hidden) });
      expect(exitCode, stdout).toBe(0);
      expect(line(stdout, 'models')).toContain('flux-dev unknown, flux-schnell unknown, sdxl unknown');
      expect(line(stdout, 'prices')).toMatch(/^prices ~ guess ~ unknown for every model: no price at price_usd, price/);
      expect(stdout).toContain('--spend-cap needs --price <model>=<usd>');
    } finally {
      await hidden.close();
    }
  });

  it('--spend-one pays once, shows the record shape and mapping, saves the image; a re-run pays nothing again', async () => {
    const key = 'imagebatch-doctor/spend-one/flux-schnell';
    const charges = () =>
      sim.charges
        .byIdempotencyKey()
        .filter((s) => s.idempotencyKey === key)
        .map((s) => s.chargedUsd);
    const first = await run({ env: envFor(sim), spendOne: true, model: 'flux-schnell', out: 'paid' });
    expect(first.exitCode, first.stdout).toBe(0);
    expect(line(first.stdout, 'submission')).toMatch(
      /^submission ~ ok ~ HTTP 202, creation \S+, key imagebatch-doctor\/spend-one\/flux-schnell/,
    );
    expect(line(first.stdout, 'record shape')).toMatch(
      /keys \(values not shown\): id, status, model, prompt, .*cost_usd, images\[\]\.url/,
    );
    expect(first.stdout).not.toContain('red apple'); // the prompt is a value: never shown
    expect(line(first.stdout, 'mapped status')).toMatch(/ok ~ "succeeded" means succeeded/);
    expect(line(first.stdout, 'mapped cost')).toMatch(/ok ~ \$0\.01, read at cost_usd/);
    expect(line(first.stdout, 'mapped images')).toMatch(/ok ~ 1 image reference/);
    expect(line(first.stdout, 'image host')).toMatch(
      new RegExp(`ok ~ 127\\.0\\.0\\.1:${sim.filesPort} \\(not the base URL host`),
    );
    const saved = first.report?.spendOne?.saved ?? [];
    expect(saved).toHaveLength(1);
    expect((await stat(saved[0] ?? '')).size).toBeGreaterThan(0);
    expect(first.stdout).toContain('a re-run pays nothing again');
    expect(charges()).toEqual([0.01]);

    // The same folder: its record names the creation, which is followed, never submitted again.
    const again = await run({ env: envFor(sim), spendOne: true, model: 'flux-schnell', out: 'paid' });
    expect(again.exitCode, again.stdout).toBe(0);
    expect(line(again.stdout, 'submission')).toMatch(
      /^submission ~ ok ~ not sent: .* holds key imagebatch-doctor\/spend-one\/flux-schnell/,
    );
    // Another folder (no record): the same key is sent, and the service replays it.
    const elsewhere = await run({ env: envFor(sim), spendOne: true, model: 'flux-schnell', out: 'paid-elsewhere' });
    expect(elsewhere.exitCode, elsewhere.stdout).toBe(0);
    expect(line(elsewhere.stdout, 'submission')).toMatch(/a replay of the earlier acceptance, nothing charged again/);
    expect(elsewhere.report?.spendOne?.creationId).toBe(first.report?.spendOne?.creationId);
    expect(charges()).toEqual([0.01]);
    const record = JSON.parse(await readFile(path.join(dir, 'paid', 'doctor-spend-one.json'), 'utf8')) as Record<
      string,
      { creationId?: string }
    >;
    expect(record[key]?.creationId).toBe(first.report?.spendOne?.creationId);
  });

  it('--spend-one with the key in a body field: says where it travels; sent again, it is replayed there', async () => {
    const prediction = await startSimulator({
      ...PREDICTION_SERVICE_PROFILE,
      generation: { queuedMs: { minMs: 10, maxMs: 20 }, runningMs: { minMs: 50, maxMs: 100 } },
      limits: { minPollIntervalMs: 200, requestsPerSecond: 100, burst: 100 },
    });
    try {
      const fields = Object.entries(PREDICTION_SERVICE_PROFILE.requestLayout!.fields!).map(([f, t]) => `${f}=${t}`);
      const env = envFor(prediction, {
        IMAGEGEN_REQUEST_FIELDS: fields.join(','),
        IMAGEGEN_IDEMPOTENCY_FIELD: 'metadata.idempotency_key',
      });
      const first = await run({ env, spendOne: true, model: 'sdxl', out: 'key-field' });
      expect(first.exitCode, first.stdout).toBe(0);
      expect(line(first.stdout, 'settings')).toContain('idempotency key in body field metadata.idempotency_key;');
      expect(line(first.stdout, 'submission')).toMatch(
        /^submission ~ ok ~ HTTP 202, creation \S+, key \S+ \(in the body field metadata\.idempotency_key\)$/,
      );
      const again = await run({ env, spendOne: true, model: 'sdxl', out: 'key-field-elsewhere' });
      expect(line(again.stdout, 'submission')).toMatch(/a replay of the earlier acceptance, nothing charged again/);
      expect(prediction.charges.byIdempotencyKey().map((s) => s.netCharged)).toEqual([1]);
    } finally {
      await prediction.close();
    }
  });

  it('--spend-one with a model the account lacks submits nothing (exit 3)', async () => {
    const before = sim.charges.entries().length;
    const { exitCode, stdout } = await run({ env: envFor(sim), spendOne: true, model: 'no-such-model', out: 'x' });
    expect(exitCode).toBe(3);
    expect(line(stdout, 'spend one')).toMatch(
      /^spend one ~ FAIL ~ model no-such-model is not in the account's catalog; nothing was submitted/,
    );
    expect(sim.charges.entries().length).toBe(before);
  });

  it('guesses catalog ids under a common name (slug): a warning naming the setting, not a failure (exit 0)', async () => {
    const slugs = await startSimulator({ catalog: { idField: 'slug' } });
    try {
      const { exitCode, stdout } = await run({ env: envFor(slugs) });
      expect(exitCode, stdout).toBe(0);
      expect(line(stdout, 'models')).toMatch(
        /^models ~ warn ~ no model id at id \(IMAGEGEN_MODEL_ID_FIELDS\); the entries carry ids under slug: flux-dev \$0\.04, flux-schnell \$0\.01, sdxl \$0\.02$/,
      );
      expect(stdout).toContain("IMAGEGEN_MODEL_ID_FIELDS='slug'");
    } finally {
      await slugs.close();
    }
  });

  it('with --model, guesses the catalog field whose values include it (exit 0 with the setting to write)', async () => {
    // `handle` is no common name: only the model asked for shows where the ids are.
    const handles = await startSimulator({
      catalog: { idField: 'handle' },
      generation: { queuedMs: { minMs: 10, maxMs: 20 }, runningMs: { minMs: 50, maxMs: 100 } },
      limits: { minPollIntervalMs: 200, requestsPerSecond: 100, burst: 100 },
    });
    try {
      const { exitCode, stdout } = await run({
        env: envFor(handles),
        spendOne: true,
        model: 'sdxl',
        out: 'by-value',
      });
      expect(exitCode, stdout).toBe(0);
      expect(line(stdout, 'models')).toMatch(
        /^models ~ warn ~ no model id at id \(IMAGEGEN_MODEL_ID_FIELDS\); the model asked for, sdxl, is under handle: flux-dev \$0\.04, flux-schnell \$0\.01, sdxl \$0\.02$/,
      );
      expect(line(stdout, 'submission')).toMatch(/^submission ~ ok ~ HTTP 202/);
      expect(stdout).toContain("IMAGEGEN_MODEL_ID_FIELDS='handle'");
    } finally {
      await handles.close();
    }
  });

  it('--spend-one still runs when the catalog shape is not understood, or there is no catalog at the path', async () => {
    const odd = await startSimulator({
      catalog: { idField: 'weird_ref' },
      generation: { queuedMs: { minMs: 10, maxMs: 20 }, runningMs: { minMs: 50, maxMs: 100 } },
      limits: { minPollIntervalMs: 200, requestsPerSecond: 100, burst: 100 },
    });
    try {
      // No catalog at the models path: the base URL is right (the creation path answers as documented).
      const none = await run({
        env: envFor(odd, { IMAGEGEN_MODELS_PATH: '/creations/not-a-catalog' }),
        spendOne: true,
        model: 'flux-dev',
        out: 'no-catalog',
      });
      expect(none.exitCode, none.stdout).toBe(1);
      expect(line(none.stdout, 'submission')).toMatch(/^submission ~ ok ~ HTTP 202/);
      expect(line(none.stdout, 'mapped images')).toMatch(/ok ~ 1 image reference/);
      expect(line(none.stdout, 'base URL')).toMatch(/^base URL ~ ok ~ /);
      expect(line(none.stdout, 'models')).toMatch(/^models ~ FAIL ~ GET \/creations\/not-a-catalog answered HTTP 404/);
      // Ids under a name no catalog uses, and no --model to look for: a failure, which --spend-one would not skip.
      const plain = await run({ env: envFor(odd) });
      expect(plain.exitCode, plain.stdout).toBe(1);
      expect(line(plain.stdout, 'models')).toMatch(
        /^models ~ FAIL ~ no model id at id \(IMAGEGEN_MODEL_ID_FIELDS\) in the catalog's 3 entries; no other field holds one \(their fields: weird_ref, name, price_usd\)/,
      );
      expect(plain.stdout).toContain('doctor --spend-one --model <id> still runs the paid test');
    } finally {
      await odd.close();
    }
  });

  it('--spend-one names an unrecognised success word and an image found elsewhere, and prints the settings to write', async () => {
    const shaped = await startSimulator({
      records: { imageShape: 'nested', statusField: 'state', succeededStatus: 'COMPLETED_OK' },
      pricing: { fields: 'renamed' },
      generation: { queuedMs: { minMs: 10, maxMs: 20 }, runningMs: { minMs: 50, maxMs: 100 } },
      limits: { minPollIntervalMs: 200, requestsPerSecond: 100, burst: 100 },
    });
    try {
      const { stdout, report } = await run({
        env: envFor(shaped, { IMAGEGEN_STATUS_FIELDS: 'state' }),
        spendOne: true,
        model: 'flux-dev',
        out: 'shaped',
        maxWaitMs: 20_000,
      });
      expect(line(stdout, 'mapped status')).toMatch(
        /^mapped status ~ FAIL ~ "COMPLETED_OK" \(at state\) is not in IMAGEGEN_SUCCESS_STATUSES and is not "failed": a batch waits on it as in flight, yet the record carries an image/,
      );
      expect(line(stdout, 'mapped images')).toMatch(
        /^mapped images ~ warn ~ 1 image reference\(s\) found at result\.files\[0\]\.href, not at IMAGEGEN_IMAGE_FIELDS/,
      );
      expect(line(stdout, 'mapped cost')).toMatch(/ok ~ \$0\.04, read at charge/);
      expect(line(stdout, 'record fields')).toMatch(/id at id, status at state, cost at charge/);
      const block = stdout.slice(stdout.indexOf('settings to write'));
      expect(block.split('\n').slice(1, 3)).toEqual([
        "IMAGEGEN_SUCCESS_STATUSES='succeeded,completed,complete,success,done,completed_ok'",
        "IMAGEGEN_IMAGE_FIELDS='result.files[].href'",
      ]);
      expect(block).not.toContain('IMAGEGEN_COST_FIELDS');
      expect(block).not.toContain('http');
      expect(report?.settings?.map((s) => s.variable)).toEqual(['IMAGEGEN_SUCCESS_STATUSES', 'IMAGEGEN_IMAGE_FIELDS']);
      expect(report?.spendOne?.saved).toHaveLength(1);
    } finally {
      await shaped.close();
    }
  });

  it('refuses --spend-one without --model (exit 2), from the command line too', async () => {
    const { exitCode, stderr } = await run({ env: envFor(sim), spendOne: true });
    expect(exitCode).toBe(2);
    expect(stderr).toEqual(['imagebatch doctor: --spend-one needs --model <id> (one of the models doctor lists)']);
    expect(await main(['node', 'imagebatch', 'doctor', '--local', '--spend-one'])).toBe(2);
  });
});
