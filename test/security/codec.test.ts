import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import type { Payload } from '@temporalio/common';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  AesGcmPayloadCodec,
  ENCRYPTED_ENCODING,
  KEY_ID_METADATA,
  PayloadCodecError,
  PayloadCodecErrorCode,
  clientDataConverter,
  payloadCodecFromEnv,
  payloadKeyId,
} from '../../src/codec';
import { PAYLOAD_KEY_ENV, PAYLOAD_KEY_FILE_ENV, loadPayloadKeys } from '../../src/config/codec-config';
import { ConfigError } from '../../src/config/service-config';
import type { WrittenResults } from '../../src/results';
import { DEMO_API_KEY, startSimulator, type Simulator } from '../../src/simulator';
import { DevServer } from '../../src/temporal/dev-server';
import { devServerBase } from '../../src/local/dev-server-base';
import type { BatchProgress } from '../../src/model';
import { baseEnv, cli, cliJson, describeRun } from '../cli/helpers';
import { ensureDistIsFresh } from '../helpers/dist';
import { WorkerProcess } from '../helpers/worker-process';
import { fetchAllHistories, findForms, payloadsIn, randomAlnum, secretForms } from './helpers';

/**
 * The AES-256-GCM payload codec: round trips, tamper and wrong-key detection, rotation and key loading; then a
 * batch on the dev server with the codec on the worker and the CLI, whose histories must hold no plain prompt
 * while the key still gives every prompt back.
 */

const key = () => randomBytes(32);
const b64 = (k: Buffer) => k.toString('base64');
const utf8 = (bytes: Uint8Array | null | undefined) => Buffer.from(bytes ?? new Uint8Array(0)).toString('utf8');

/** A payload as comparable data: metadata and data as hex. */
function plain(p: Payload) {
  const entries = Object.entries(p.metadata ?? {}).map(([k, v]): [string, string] => [
    k,
    Buffer.from(v ?? new Uint8Array(0)).toString('hex'),
  ]);
  return {
    metadata: Object.fromEntries(entries.sort(([a], [b]) => a.localeCompare(b))),
    data: Buffer.from(p.data ?? new Uint8Array(0)).toString('hex'),
  };
}

const payloadArb = fc.record({
  metadata: fc.dictionary(fc.stringMatching(/^[a-z][a-z0-9-]{0,15}$/), fc.uint8Array({ maxLength: 40 })),
  data: fc.uint8Array({ maxLength: 2000 }),
});

async function codecError(promise: Promise<unknown>): Promise<PayloadCodecError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(PayloadCodecError);
  return err as PayloadCodecError;
}

describe('AesGcmPayloadCodec', () => {
  it('gives every payload back exactly (property)', async () => {
    const codec = new AesGcmPayloadCodec([key()]);
    await fc.assert(
      fc.asyncProperty(fc.array(payloadArb, { maxLength: 5 }), async (payloads) => {
        const encoded = await codec.encode(payloads);
        expect(encoded).toHaveLength(payloads.length);
        const decoded = await codec.decode(encoded);
        expect(decoded.map(plain)).toEqual(payloads.map(plain));
      }),
      { numRuns: 200 },
    );
  });

  it('hides the data and its encoding, names the key by id, and never repeats a ciphertext', async () => {
    const k = key();
    const codec = new AesGcmPayloadCodec([k]);
    const payload = { metadata: { encoding: Buffer.from('json/plain') }, data: Buffer.from('"a very secret prompt"') };
    const [a, b] = await codec.encode([payload, payload]);
    for (const p of [a!, b!]) {
      expect(Object.keys(p.metadata ?? {}).sort()).toEqual([KEY_ID_METADATA, 'encoding'].sort());
      expect(utf8(p.metadata?.encoding)).toBe(ENCRYPTED_ENCODING);
      expect(utf8(p.metadata?.[KEY_ID_METADATA])).toBe(payloadKeyId(k));
      const bytes = Buffer.from(p.data!);
      expect(bytes.includes(Buffer.from('secret prompt'))).toBe(false);
      expect(bytes.includes(Buffer.from('json/plain'))).toBe(false);
    }
    expect(Buffer.from(a!.data!).equals(Buffer.from(b!.data!))).toBe(false);
    expect(payloadKeyId(k)).toBe(createHash('sha256').update(k).digest('hex').slice(0, 8));
    expect(codec.keyId).toMatch(/^[0-9a-f]{8}$/);
  });

  it('passes payloads that are not encrypted through decode unchanged', async () => {
    const codec = new AesGcmPayloadCodec([key()]);
    const payload = { metadata: { encoding: Buffer.from('json/plain') }, data: Buffer.from('"x"') };
    expect((await codec.decode([payload]))[0]).toBe(payload);
  });

  it('detects any changed byte (nonce, ciphertext or tag) with PAYLOAD_TAMPERED (property)', async () => {
    const codec = new AesGcmPayloadCodec([key()]);
    await fc.assert(
      fc.asyncProperty(payloadArb, fc.nat(), fc.integer({ min: 1, max: 255 }), async (payload, at, flip) => {
        const [encoded] = await codec.encode([payload]);
        const data = Buffer.from(encoded!.data!);
        const i = at % data.length;
        data.writeUInt8(data.readUInt8(i) ^ flip, i);
        const err = await codecError(codec.decode([{ ...encoded!, data }]));
        expect(err.code).toBe(PayloadCodecErrorCode.Tampered);
        expect(err.keyId).toBe(codec.keyId);
      }),
      { numRuns: 200 },
    );
  });

  it('refuses a payload relabelled to another configured key, a truncated one, and one without key id', async () => {
    const [k1, k2] = [key(), key()];
    const codec = new AesGcmPayloadCodec([k1, k2]);
    const [encoded] = await codec.encode([{ metadata: {}, data: Buffer.from('prompt') }]);
    const relabelled = {
      ...encoded!,
      metadata: { ...encoded!.metadata, [KEY_ID_METADATA]: Buffer.from(payloadKeyId(k2)) },
    };
    expect((await codecError(codec.decode([relabelled]))).code).toBe(PayloadCodecErrorCode.Tampered);
    const truncated = { ...encoded!, data: Buffer.from(encoded!.data!).subarray(0, 20) };
    expect((await codecError(codec.decode([truncated]))).code).toBe(PayloadCodecErrorCode.Malformed);
    const noId = { metadata: { encoding: Buffer.from(ENCRYPTED_ENCODING) }, data: encoded!.data! };
    expect((await codecError(codec.decode([noId]))).code).toBe(PayloadCodecErrorCode.Malformed);
  });

  it('a codec without the key says which key id it lacks, and quotes no key', async () => {
    const [k1, k2] = [key(), key()];
    const [encoded] = await new AesGcmPayloadCodec([k1]).encode([{ metadata: {}, data: Buffer.from('p') }]);
    const err = await codecError(new AesGcmPayloadCodec([k2]).decode([encoded!]));
    expect(err.code).toBe(PayloadCodecErrorCode.UnknownKey);
    expect(err.keyId).toBe(payloadKeyId(k1));
    expect(err.message).toContain(payloadKeyId(k1));
    expect(err.message).toContain(PAYLOAD_KEY_ENV);
    for (const k of [k1, k2]) {
      expect(err.message).not.toContain(b64(k));
      expect(err.message).not.toContain(k.toString('hex'));
    }
  });

  it('rotates: the new key encrypts, the old one still decrypts, and dropping it is an unknown key', async () => {
    const [oldKey, newKey] = [key(), key()];
    const before = new AesGcmPayloadCodec([oldKey]);
    const during = new AesGcmPayloadCodec([newKey, oldKey]);
    const after = new AesGcmPayloadCodec([newKey]);
    const payload = { metadata: { encoding: Buffer.from('json/plain') }, data: Buffer.from('"row"') };
    const [old] = await before.encode([payload]);
    const [fresh] = await during.encode([payload]);
    expect(during.keyId).toBe(payloadKeyId(newKey));
    expect(during.keyIds).toEqual([payloadKeyId(newKey), payloadKeyId(oldKey)]);
    expect(utf8(fresh!.metadata?.[KEY_ID_METADATA])).toBe(payloadKeyId(newKey));
    expect((await during.decode([old!, fresh!])).map(plain)).toEqual([plain(payload), plain(payload)]);
    expect((await after.decode([fresh!])).map(plain)).toEqual([plain(payload)]);
    expect((await codecError(after.decode([old!]))).code).toBe(PayloadCodecErrorCode.UnknownKey);
    expect((await codecError(before.decode([fresh!]))).code).toBe(PayloadCodecErrorCode.UnknownKey);
  });
});

describe('payload keys from the environment', () => {
  const problem = (fn: () => unknown): ConfigError => {
    try {
      fn();
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      return err as ConfigError;
    }
    throw new Error('expected a ConfigError');
  };

  it('is off when neither variable is set', () => {
    expect(loadPayloadKeys({})).toBeUndefined();
    expect(payloadCodecFromEnv({ [PAYLOAD_KEY_ENV]: '  ' })).toBeUndefined();
  });

  it('reads one key, or several newest first, from the variable or a file', () => {
    const [k1, k2] = [key(), key()];
    expect(loadPayloadKeys({ [PAYLOAD_KEY_ENV]: b64(k1) })?.keys).toEqual([k1]);
    expect(loadPayloadKeys({ [PAYLOAD_KEY_ENV]: ` ${b64(k1)} , ${b64(k2)} ` })?.keys).toEqual([k1, k2]);
    const files: Record<string, string> = { '/keys': `${b64(k2)}\n${b64(k1)}\n` };
    const fromFile = loadPayloadKeys({ [PAYLOAD_KEY_FILE_ENV]: '/keys' }, (p) => files[p]!);
    expect(fromFile?.keys).toEqual([k2, k1]);
    expect(payloadCodecFromEnv({ [PAYLOAD_KEY_ENV]: `${b64(k2)},${b64(k1)}` })?.keyIds).toEqual([
      payloadKeyId(k2),
      payloadKeyId(k1),
    ]);
  });

  it('names the variable and what is wrong, and never prints the key', () => {
    const short = randomBytes(16).toString('base64');
    const good = b64(key());
    const cases: [Record<string, string>, string, RegExp, string | undefined][] = [
      [{ [PAYLOAD_KEY_ENV]: short }, PAYLOAD_KEY_ENV, /24 characters, 16 bytes/, short],
      [{ [PAYLOAD_KEY_ENV]: 'correct horse battery staple' }, PAYLOAD_KEY_ENV, /not the base64 of 32 bytes/, 'horse'],
      [{ [PAYLOAD_KEY_ENV]: `${good},${short}` }, PAYLOAD_KEY_ENV, /key 2 of 2/, short],
      [{ [PAYLOAD_KEY_ENV]: `${good},${good}` }, PAYLOAD_KEY_ENV, /repeats an earlier key/, good],
      [{ [PAYLOAD_KEY_ENV]: good, [PAYLOAD_KEY_FILE_ENV]: '/k' }, PAYLOAD_KEY_ENV, /only one of/, good],
      // The path is named by its variable, never printed (it may be the key itself, put in the wrong variable).
      [
        { [PAYLOAD_KEY_FILE_ENV]: '/missing' },
        PAYLOAD_KEY_FILE_ENV,
        /cannot read the file it names \(ENOENT\)$/,
        '/missing',
      ],
      [{ [PAYLOAD_KEY_FILE_ENV]: '/empty' }, PAYLOAD_KEY_FILE_ENV, /holds no key/, undefined],
    ];
    const readFile = (p: string) => {
      if (p === '/empty') return '\n \n';
      throw Object.assign(new Error(`ENOENT: ${p}`), { code: 'ENOENT' });
    };
    for (const [env, variable, message, secret] of cases) {
      const err = problem(() => loadPayloadKeys(env, readFile));
      expect(err.code).toBe('CONFIG_INVALID');
      expect(err.variable).toBe(variable);
      expect(err.message).toMatch(message);
      expect(err.message.startsWith(`${variable}: `)).toBe(true);
      if (secret) expect(err.message).not.toContain(secret);
    }
  });
});

describe('a batch with the codec on the worker and the CLI', { timeout: 300_000 }, () => {
  const payloadKey = key();
  const codec = new AesGcmPayloadCodec([payloadKey]);
  const MARK = `codecplain${randomAlnum(12)}`;
  const PROMPTS = [
    `a lighthouse on a basalt cliff at dusk ${MARK} one`,
    `a red fox curled up in fresh snow ${MARK} two`,
    `a bowl of ramen with steam rising ${MARK} three`,
    `[unsafe] a dragon over a burning village ${MARK} four`,
  ];
  let dir: string;
  let server: DevServer | undefined;
  let sim: Simulator | undefined;
  let worker: WorkerProcess | undefined;
  let connection: Connection | undefined;
  let temporalEnv: Record<string, string>;

  beforeAll(async () => {
    await ensureDistIsFresh();
    dir = await mkdtemp(path.join(os.tmpdir(), 'imagebatch-codec-'));
    [server, sim] = await Promise.all([
      DevServer.start({ ...devServerBase(), uiPort: false }),
      startSimulator({
        generation: { queuedMs: { minMs: 50, maxMs: 150 }, runningMs: { minMs: 200, maxMs: 500 } },
        limits: { minPollIntervalMs: 200, requestsPerSecond: 1000, burst: 1000, accountConcurrency: null },
        safety: { genericDeclineProbability: 0 },
      }),
    ]);
    temporalEnv = {
      TEMPORAL_ADDRESS: server.address,
      TEMPORAL_TASK_QUEUE: 'codec',
      [PAYLOAD_KEY_ENV]: b64(payloadKey),
    };
    worker = await WorkerProcess.start({
      outputRoot: dir,
      env: baseEnv({
        ...temporalEnv,
        IMAGEGEN_BASE_URL: sim.baseUrl,
        IMAGEGEN_API_KEY: DEMO_API_KEY,
        IMAGEGEN_MIN_POLL_INTERVAL_MS: '250',
      }),
      readyTimeoutMs: 90_000,
    });
    connection = await Connection.connect({ address: server.address });
  });

  afterAll(async () => {
    await connection?.close();
    await worker?.stop();
    await sim?.close();
    await server?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('the worker and the CLI refuse a wrong payload key at start, naming the variable, not the value', async () => {
    const wrong = `${randomAlnum(20)}==`;
    const env = baseEnv({ TEMPORAL_ADDRESS: '127.0.0.1:1', IMAGEGEN_API_KEY: DEMO_API_KEY, [PAYLOAD_KEY_ENV]: wrong });
    for (const args of [['worker'], ['status', 'b']]) {
      const r = await cli(args, { env });
      expect(r.code, describeRun(args, r)).toBe(1);
      expect(r.stderr).toContain(`${PAYLOAD_KEY_ENV}: the key in ${PAYLOAD_KEY_ENV} is not the base64 of 32 bytes`);
      expect(r.stdout + r.stderr).not.toContain(wrong);
    }
  });

  it('stores no plain prompt in any history, and the key gives every prompt back', async () => {
    expect(worker!.output()).toContain(`payloads encrypted with key id ${codec.keyId}`);
    const file = path.join(dir, 'codec.csv');
    const out = path.join(dir, 'out');
    await writeFile(file, ['id,prompt', ...PROMPTS.map((p, i) => `c${i + 1},${p}`)].join('\n') + '\n');
    const env = { env: baseEnv(temporalEnv), timeoutMs: 120_000 };
    const args = ['run', file, '--batch-id', 'codec', '--model', 'flux-dev', '--out', out, '--follow', '--json'];
    args.push('--allow-partial'); // the [unsafe] row fails
    const r = await cli(args, env);
    expect(r.code, `${describeRun(args, r)}\n${worker!.output().slice(-3000)}`).toBe(0);
    const final = JSON.parse(r.stdout) as BatchProgress;
    expect(final).toMatchObject({ status: 'completed', counts: { succeeded: 3, failed: 1 } });

    // The results, through the CLI with the key: every prompt and image as the rows produced them.
    const written = await cliJson<WrittenResults>(['results', 'codec', '--json'], env);
    const rows = (await readFile(written.resultsJsonl, 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { prompt: string; state: string; images: { path: string; sha256: string }[] });
    expect(rows.map((row) => row.prompt)).toEqual(PROMPTS);
    expect(rows.map((row) => row.state)).toEqual(['succeeded', 'succeeded', 'succeeded', 'failed']);
    for (const row of rows.slice(0, 3)) {
      expect(row.images.length).toBeGreaterThan(0);
      for (const image of row.images) {
        const bytes = await readFile(path.join(out, image.path));
        expect(createHash('sha256').update(bytes).digest('hex')).toBe(image.sha256);
      }
    }

    // Every history of the namespace, as stored: no prompt, raw or base64 or hex, and not the marker alone.
    const histories = await fetchAllHistories(connection!);
    // Besides the batch and its rows: what `run` asked a worker before the first request (the service's free checks,
    // the catalog, and which requests were paid before), whose histories are held to the same rule.
    const ids = histories.map((h) => h.workflowId).sort();
    expect(ids.filter((id) => id.startsWith('service-check/'))).toHaveLength(1);
    expect(ids.filter((id) => !/^(catalog|paid-before|service-check)\//.test(id))).toEqual([
      'batch/codec',
      'codec/c1',
      'codec/c2',
      'codec/c3',
      'codec/c4',
    ]);
    expect(ids.filter((id) => id.startsWith('paid-before/'))).toHaveLength(1);
    for (const prompt of PROMPTS) {
      const forms = secretForms(prompt, MARK);
      for (const h of histories) expect(findForms(h.bytes, forms), `${prompt} in ${h.workflowId}`).toEqual([]);
    }
    // The payloads that are not encrypted are search attributes (the server indexes those in the clear), the SDK's
    // own patch markers (a patch id) and the metadata of its local-activity markers (a sequence number, the activity's
    // type, times: the row's recordRow), which Temporal writes without the codec; the local activity's result is
    // encrypted like any other.
    const payloads = histories.flatMap((h) => payloadsIn(h.history).map((p) => ({ ...p, workflowId: h.workflowId })));
    const clear = payloads.filter((p) => utf8(p.payload.metadata?.encoding) !== ENCRYPTED_ENCODING);
    const sdkOwn = /searchAttributes|markerRecordedEventAttributes\.details\.patch-data\./;
    const localActivityMeta = (p: (typeof clear)[number]) => {
      if (!/markerRecordedEventAttributes\.details\.data\./.test(p.path)) return false;
      const meta = JSON.parse(utf8(p.payload.data)) as Record<string, unknown>;
      const fields = [
        'seq',
        'attempt',
        'activity_id',
        'activity_type',
        'complete_time',
        'original_schedule_time',
        'backoff',
      ];
      return meta.activity_type === 'recordRow' && Object.keys(meta).every((k) => fields.includes(k));
    };
    expect(clear.filter((p) => !sdkOwn.test(p.path) && !localActivityMeta(p))).toEqual([]);
    expect(payloads.length - clear.length).toBeGreaterThan(20);

    // Positive control: decrypted with the key, the same histories hold every prompt.
    const decoded = await codec.decode(payloads.map((p) => p.payload));
    const clearText = Buffer.concat(decoded.map((p) => Buffer.from(p.data ?? new Uint8Array(0))));
    for (const prompt of PROMPTS) expect(clearText.includes(Buffer.from(prompt)), prompt).toBe(true);
    // The service's words about the failed row are encrypted too (results and failure texts alike).
    const safety = Buffer.from('rejected by the safety filter');
    expect(histories.filter((h) => h.bytes.includes(safety)).map((h) => h.workflowId)).toEqual([]);
    expect(clearText.includes(safety)).toBe(true);

    // Without the key a client cannot read the batch; with it, it can.
    const blind = new Client({ connection: connection! }).workflow.getHandle('batch/codec');
    await expect(blind.result()).rejects.toThrow(/encoding|encrypted/i);
    const sighted = new Client({ connection: connection!, dataConverter: clientDataConverter(codec) });
    expect(await sighted.workflow.getHandle('batch/codec').result()).toMatchObject({ counts: { succeeded: 3 } });
    const clearKinds = [...new Set(clear.map((p) => p.path.replace(/^events\.\d+\./, '').replace(/\.\d+$/, '')))];
    console.log(
      `[codec] ${histories.length} histories, ${payloads.length} payloads, ${clear.length} in the clear ` +
        `(${clearKinds.join(', ')}); ${PROMPTS.length} prompts searched in ${secretForms(PROMPTS[0]!, MARK).length} forms`,
    );
  });
});
