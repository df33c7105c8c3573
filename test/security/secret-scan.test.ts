import { mkdir, mkdtemp, readFile, rm, writeFile, appendFile } from 'node:fs/promises';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Connection } from '@temporalio/client';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { secretArgumentProblem } from '../../src/cli/secret-args';
import type { WrittenResults } from '../../src/results';
import { FaultKind, startSimulator, type Simulator } from '../../src/simulator';
import type { BatchProgress } from '../../src/model';
import { BIN, baseEnv, cli, cliJson, describeRun, waitUntil, type CliResult } from '../cli/helpers';
import { ensureDistIsFresh } from '../helpers/dist';
import {
  LoggedProcess,
  fetchAllHistories,
  findForms,
  randomAlnum,
  scanFiles,
  scanProcesses,
  secretForms,
  startLoggedDevServer,
  walkFiles,
  type ProcessEntry,
  type StoredHistory,
} from './helpers';

/**
 * The API key is nowhere but in the worker's environment. A batch runs with a recognisable key through every
 * kind of outcome (success, refunded and resubmitted, safety filter, unknown model, 503 with Retry-After, a lost
 * response, a 500 after the charge, and a 401 for every row while the key is revoked, until it is back and the
 * batch resumed), with the dev server, the worker and each CLI command as child processes. Then every workflow
 * history of the namespace, every line the worker, the CLI and the dev server printed, every file under the test
 * folder (results, images, gallery, the server's SQLite, the simulator's state) and every process's command line
 * are searched for the key in each form it could take. The worker's /proc environ, which must hold it, and a
 * planted key file prove that the scanners find the key where it is.
 */

const TOKEN = `ScanMarker${randomAlnum(30)}`;
const SECRET = `sk_live_${TOKEN}`;
const MIDDLE = TOKEN.slice(6, 30);
const FORMS = secretForms(SECRET, MIDDLE);
const ACCOUNT = 'acct_scan';
const BATCH = 'scan';

const ROWS = [
  'id,prompt,model',
  's1,a lighthouse on a basalt cliff at dusk,',
  's2,a red fox curled up in fresh snow,flux-schnell',
  's3,[flaky] a tram crossing a bridge in the rain,',
  's4,[unsafe] a dragon over a burning village,',
  's5,a koi pond seen from above in autumn,sdxl',
  's6,[busy] a desert caravan at sunrise,',
  's7,[lost] a paper boat on a puddle after rain,',
  "s8,[oops] a clockmaker's workbench with brass gears,",
  's9,[echo] a glass greenhouse full of ferns,',
];
const ROW_IDS = ROWS.slice(1).map((line) => line.split(',')[0]!);

/**
 * A hostile service: a loopback proxy in front of the simulator that answers a submission whose prompt holds `[echo]`
 * with a 400 whose message and field error echo the request's Authorization header, every character JSON-escaped
 * (`\u0073\u006b...`), which no redaction of the raw text finds and `JSON.parse` turns back into the key. Everything
 * else goes to the simulator as it is.
 */
async function startEchoProxy(
  target: string,
): Promise<{ baseUrl: string; echoes: () => number; close(): Promise<void> }> {
  const upstream = new URL(target);
  let echoes = 0;
  const escaped = (text: string) =>
    [...text].map((c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`).join('');
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      if (req.method === 'POST' && body.toString('utf8').includes('[echo]')) {
        echoes += 1;
        const echo = escaped(String(req.headers.authorization ?? ''));
        res.writeHead(400, { 'content-type': 'application/json' });
        res.end(
          `{"error":{"code":"ERR_INVALID_REQUEST","message":"not accepted for ${echo}",` +
            `"details":{"errors":[{"field":"prompt","message":"${echo}"}]}}}`,
        );
        return;
      }
      const forward = request(
        { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers },
        (answer) => {
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
        },
      );
      forward.on('error', () => res.destroy());
      forward.end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}${upstream.pathname}`,
    echoes: () => echoes,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

describe('the scanner', () => {
  it('finds the key inside any longer base64, base64url or hex text, at every offset (property)', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), fc.uint8Array({ maxLength: 64 }), (before, after) => {
        const whole = Buffer.concat([before, Buffer.from(SECRET), after]);
        expect(findForms(whole.toString('base64'), FORMS).some((f) => f.startsWith('base64@'))).toBe(true);
        expect(findForms(whole.toString('base64url'), FORMS).some((f) => f.startsWith('base64url@'))).toBe(true);
        expect(findForms(whole.toString('hex'), FORMS)).toContain('hex');
        expect(findForms(whole, FORMS)).toEqual(expect.arrayContaining(['raw', 'middle']));
      }),
      { numRuns: 300 },
    );
  });

  it('finds a truncated copy by its middle, and nothing in text without the key', () => {
    expect(findForms(`token=${SECRET.slice(0, 40)}...`, FORMS)).toEqual(['middle']);
    const other = `sk_live_${randomAlnum(40)}`;
    expect(findForms(`${other} ${Buffer.from(other).toString('base64')}`, FORMS)).toEqual([]);
  });
});

describe('API keys on the command line', { timeout: 120_000 }, () => {
  beforeAll(async () => {
    await ensureDistIsFresh();
  });

  const payloadKey = Buffer.alloc(32, 7).toString('base64');
  const cases: { args: string[]; value: string }[] = [
    { args: ['worker', '--api-key', SECRET], value: SECRET },
    { args: ['worker', `--api-key=${SECRET}`], value: SECRET },
    { args: ['demo', '--imagegen-api-key', SECRET], value: SECRET },
    { args: ['validate', 'x.csv', '--catalog', '--token', SECRET], value: SECRET },
    { args: ['run', 'x.csv', '--API_KEY', SECRET, '--follow'], value: SECRET },
    { args: ['run', SECRET], value: SECRET },
    { args: ['status', 'b', '--key', 'not-key-shaped-but-secret-1234'], value: 'not-key-shaped-but-secret-1234' },
    { args: ['resume', 'b', `--secret=${SECRET}`], value: SECRET },
    { args: ['results', 'b', '--payload-key', payloadKey], value: payloadKey },
    { args: ['ls', `--header=Authorization: Bearer ${SECRET}`], value: SECRET },
    { args: ['schedule', 'create', 'n', '--file', 'x.csv', '--cron', '0 2 * * *', '--api-key', SECRET], value: SECRET },
    { args: ['simulator', '--apikey', SECRET], value: SECRET },
  ];

  // Each case is a command of its own that stops at its checks: they run at once.
  it.concurrent.for(cases)(
    'imagebatch $args.0 refuses a key argument, names the variables, never echoes it',
    async (c, { expect }) => {
      // Nothing listens on port 1: a command that went past the check would fail in another way.
      const r = await cli(c.args, { env: baseEnv({ TEMPORAL_ADDRESS: '127.0.0.1:1' }), timeoutMs: 30_000 });
      expect(r.code, describeRun(c.args, r)).toBe(2);
      expect(r.stderr).toMatch(/never taken from the command line/);
      expect(r.stderr).toMatch(/IMAGEGEN_API_KEY or IMAGEGEN_API_KEY_FILE/);
      const out = r.stdout + r.stderr;
      expect(out.includes(c.value)).toBe(false);
      expect(findForms(out, FORMS)).toEqual([]);
    },
  );

  it('lets every ordinary argument through', () => {
    const ordinary = [
      ['run', 'prompts.csv', '--batch-id', 'b', '--model', 'flux-dev', '--out', 'o', '--concurrency', '8'],
      ['run', 'keys.csv', '--max-attempts', '3', '--spend-cap', '5', '--deadline', '2030-01-01T00:00:00Z', '--json'],
      ['schedule', 'create', 'n', '--file', 'x.csv', '--every', '1h', '--skip-succeeded', '--paused'],
      ['worker', '--output-root', '/srv/out'],
      ['validate', 'monkey.csv', '--catalog', '--model', 'sdxl'],
      ['simulator', '--port', '0', '--files-port', '0', '--config', 'sim.json'],
      ['demo', '--home', '.imagebatch', '--json'],
    ];
    for (const args of ordinary) expect(secretArgumentProblem(args), args.join(' ')).toBeUndefined();
  });
});

describe('a key in the wrong variable is named, never echoed', { timeout: 120_000 }, () => {
  beforeAll(async () => {
    await ensureDistIsFresh();
  });

  // Another key of the right format: the worker reads its key before the payload keys.
  const otherKey = `sk_live_${randomAlnum(40)}`;
  const payloadKey = Buffer.from(SECRET.slice(0, 32)).toString('base64');
  const pem = `-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC${TOKEN}\n-----END PRIVATE KEY-----\n`;
  const cases: { args: string[]; env: Record<string, string>; variable: string }[] = [
    { args: ['worker'], env: { IMAGEGEN_API_KEY_FILE: SECRET }, variable: 'IMAGEGEN_API_KEY_FILE' },
    {
      args: ['worker'],
      env: { IMAGEGEN_API_KEY: otherKey, IMAGEBATCH_PAYLOAD_KEY_FILE: payloadKey },
      variable: 'IMAGEBATCH_PAYLOAD_KEY_FILE',
    },
    {
      args: ['status', 'b'],
      env: { IMAGEBATCH_PAYLOAD_KEY_FILE: payloadKey },
      variable: 'IMAGEBATCH_PAYLOAD_KEY_FILE',
    },
    {
      args: ['worker'],
      env: { IMAGEGEN_API_KEY: otherKey, IMAGEGEN_BASE_URL: `https://user:${SECRET}@api.example.com/api/public/v1` },
      variable: 'IMAGEGEN_BASE_URL',
    },
    {
      args: ['worker'],
      env: { IMAGEGEN_API_KEY: otherKey, IMAGEGEN_BASE_URL: `https://api.example.com/api/public/v1?api_key=${SECRET}` },
      variable: 'IMAGEGEN_BASE_URL',
    },
    {
      args: ['worker'],
      env: { IMAGEGEN_API_KEY: otherKey, IMAGEGEN_AUTH_HEADER: SECRET },
      variable: 'IMAGEGEN_AUTH_HEADER',
    },
    {
      args: ['worker'],
      env: { TEMPORAL_TLS_CLIENT_CERT_DATA: 'CERT', TEMPORAL_TLS_CLIENT_KEY_PATH: pem },
      variable: 'TEMPORAL_TLS_CLIENT_KEY_PATH',
    },
    { args: ['worker'], env: { TEMPORAL_CONFIG_FILE: SECRET }, variable: 'TEMPORAL_CONFIG_FILE' },
    { args: ['ls'], env: { TEMPORAL_CONFIG_FILE: SECRET }, variable: 'TEMPORAL_CONFIG_FILE' },
    { args: ['ls'], env: { TEMPORAL_ADDRESS: SECRET }, variable: 'TEMPORAL_ADDRESS' },
  ];

  // Each case is a command of its own that stops at its checks: they run at once.
  it.concurrent.for(cases)(
    'imagebatch $args.0 with the key in $variable stops, names it, never prints it',
    async (c, { expect }) => {
      const r = await cli(c.args, { env: baseEnv({ TEMPORAL_ADDRESS: '127.0.0.1:1', ...c.env }), timeoutMs: 30_000 });
      expect(r.code, describeRun(c.args, r)).not.toBe(0);
      expect(r.stderr).toContain(c.variable);
      const out = r.stdout + r.stderr;
      expect(findForms(out, FORMS)).toEqual([]);
      expect(out.includes(payloadKey)).toBe(false);
      expect(out.includes(TOKEN)).toBe(false);
    },
  );

  it('control: the same scan finds the key when a message does print it', () => {
    expect(findForms(`TEMPORAL_CONFIG_FILE: cannot read ${SECRET} (ENOENT)`, FORMS)).toEqual(
      expect.arrayContaining(['raw', 'middle']),
    );
    expect(findForms(`cannot read -----BEGIN PRIVATE KEY-----\nMIIE${TOKEN}`, FORMS)).toContain('middle');
  });
});

describe('a batch with a recognisable key leaves it nowhere', { timeout: 300_000 }, () => {
  let dir: string;
  let logs: string;
  let sim: Simulator | undefined;
  let echo: Awaited<ReturnType<typeof startEchoProxy>> | undefined;
  let server: LoggedProcess | undefined;
  let worker: LoggedProcess | undefined;
  let address: string;
  let connection: Connection | undefined;

  beforeAll(async () => {
    await ensureDistIsFresh();
    dir = await mkdtemp(path.join(os.tmpdir(), 'imagebatch-secret-scan-'));
    logs = path.join(dir, 'logs');
    await mkdir(logs);
    const started = await startLoggedDevServer({
      dbFile: path.join(dir, 'temporal.sqlite'),
      logFile: path.join(logs, 'temporal.log'),
      env: baseEnv(),
    });
    server = started.process;
    address = started.address;
    sim = await startSimulator({
      seed: 5,
      stateFile: path.join(dir, 'simulator-state.json'),
      accounts: [{ id: ACCOUNT, models: ['flux-dev', 'flux-schnell'], keys: [{ id: 'key_scan', key: SECRET }] }],
      generation: { queuedMs: { minMs: 50, maxMs: 150 }, runningMs: { minMs: 200, maxMs: 500 } },
      limits: { minPollIntervalMs: 200, requestsPerSecond: 1000, burst: 1000, accountConcurrency: null },
      safety: { genericDeclineProbability: 0 },
      faults: { providerRetryAfterSeconds: 1 },
      scripts: [
        { match: '[flaky]', faults: [FaultKind.FailGeneration] },
        { match: '[busy]', faults: [FaultKind.ProviderUnavailable] },
        { match: '[lost]', faults: [FaultKind.ResetAfterCommit] },
        { match: '[oops]', faults: [FaultKind.InternalAfterCharge] },
      ],
    });
    echo = await startEchoProxy(sim.baseUrl);
    worker = LoggedProcess.spawn(process.execPath, [BIN, 'worker', '--output-root', dir], {
      logFile: path.join(logs, 'worker.log'),
      env: baseEnv({
        TEMPORAL_ADDRESS: address,
        TEMPORAL_TASK_QUEUE: 'secret-scan',
        IMAGEGEN_BASE_URL: echo.baseUrl,
        IMAGEGEN_API_KEY: SECRET,
        IMAGEGEN_MIN_POLL_INTERVAL_MS: '250',
        // The SDK's debug lines too: more for the scan to search.
        IMAGEBATCH_LOG_LEVEL: 'debug',
      }),
    });
    await worker.waitForLog(/worker polling/, 90_000);
    connection = await Connection.connect({ address });
  });

  afterAll(async () => {
    await connection?.close();
    await worker?.stop();
    await echo?.close();
    await sim?.close();
    await server?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  const cliEnv = () => baseEnv({ TEMPORAL_ADDRESS: address, TEMPORAL_TASK_QUEUE: 'secret-scan' });

  /** Runs a CLI command and keeps its whole output in logs/cli.log for the scan. */
  async function run(args: string[], timeoutMs = 60_000): Promise<CliResult> {
    const r = await cli(args, { env: cliEnv(), timeoutMs });
    await appendFile(path.join(logs, 'cli.log'), `$ imagebatch ${args.join(' ')}\n${r.stdout}${r.stderr}`);
    return r;
  }

  it('runs the batch through every outcome and a 401, and then finds the key only where it must be', async () => {
    const file = path.join(dir, 'scan.csv');
    const out = path.join(dir, 'out');
    await writeFile(file, `${ROWS.join('\n')}\n`);
    // A planted copy: the file scan must find it (and nothing else).
    await mkdir(path.join(dir, 'control'));
    await writeFile(path.join(dir, 'control', 'planted-key.txt'), `${SECRET}\n`);

    // Sample every process while the batch runs: the CLI's, the worker's, the server's, anyone's.
    const seen = new Map<number, ProcessEntry>();
    const cmdlineHits: ProcessEntry[] = [];
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        for (const p of await scanProcesses(FORMS)) {
          if (p.cmdlineHits.length > 0) cmdlineHits.push(p);
          if (!seen.has(p.pid)) seen.set(p.pid, p);
        }
        await sleep(300);
      }
    })();

    let final: BatchProgress;
    try {
      // 1. The key is revoked: every row that starts gets a 401 and the batch stops until it is resumed.
      sim!.revokeKey('key_scan');
      const runArgs = ['run', file, '--batch-id', BATCH, '--model', 'flux-dev', '--out', out];
      runArgs.push('--concurrency', '4', '--max-attempts', '3', '--json', '--allow-partial'); // rows fail
      // Started without --follow (a followed run checks the key first, and would refuse to start on the 401), then
      // followed: the same command again attaches to the running batch.
      const started = await run(runArgs);
      expect(started.code, describeRun(runArgs, started)).toBe(0);
      runArgs.push('--follow');
      const following = run(runArgs, 240_000);
      const stopped = await waitUntil(
        'the batch to stop on the 401',
        async () => {
          const r = await run(['status', BATCH, '--json']);
          const p = r.code === 0 ? (JSON.parse(r.stdout) as BatchProgress) : undefined;
          return p?.waiting?.kind === 'batch_stop' ? p : undefined;
        },
        120_000,
        500,
      );
      expect(stopped.waiting).toMatchObject({ kind: 'batch_stop', details: { httpStatus: 401 } });

      // 2. The key is valid again (as a new key id of the account) and the batch is resumed from the CLI.
      sim!.addKey(ACCOUNT, 'key_scan_again', SECRET);
      const resumed = await run(['resume', BATCH, '--json']);
      expect(resumed.code, describeRun(['resume'], resumed)).toBe(0);
      const followed = await following;
      expect(followed.code, `${describeRun(runArgs, followed)}\n${(await worker!.log()).slice(-3000)}`).toBe(0);
      final = JSON.parse(followed.stdout) as BatchProgress;
    } finally {
      sampling = false;
      await sampler;
    }

    // The batch went through its outcomes.
    expect(final).toMatchObject({ batchId: BATCH, status: 'completed', done: true, rowsRead: 9, inFlight: 0 });
    // s4 safety filter, s5 a model the account lacks, s9 the hostile 400 that echoed the key escaped.
    expect(final.counts.failed).toBe(3);
    expect(echo!.echoes()).toBeGreaterThanOrEqual(1);
    expect(final.counts.succeeded + final.counts.unknown).toBe(6);
    expect(final.counts.succeeded).toBeGreaterThanOrEqual(5);
    const written = await cliJson<WrittenResults>(['results', BATCH, '--json'], { env: cliEnv() });
    await appendFile(path.join(logs, 'cli.log'), JSON.stringify(written));
    expect(written.rows).toBe(9);
    const jsonl = (await readFile(written.resultsJsonl, 'utf8')).trim().split('\n');
    expect(jsonl).toHaveLength(9);
    // The echo's text is kept, the key in it is not.
    expect(jsonl.find((l) => l.includes('"row_id":"s9"'))).toMatch(/not accepted for Bearer \[REDACTED\]/);
    expect(await readFile(written.resultsCsv, 'utf8')).toMatch(/safety/i);
    const errorsCsv = await readFile(written.errorsCsv, 'utf8');
    expect(errorsCsv).toMatch(/^s4,/m);
    expect(errorsCsv).toMatch(/^s5,/m);
    expect(errorsCsv).toMatch(/^s9,/m);
    const listed = await run(['ls', '--json']);
    expect(listed.code).toBe(0);

    // 1. Every workflow history of the namespace, every run, as the server stores it.
    const histories = await waitUntil(
      'every workflow in the visibility store',
      async () => {
        const all = await fetchAllHistories(connection!);
        return ROW_IDS.every((id) => all.some((h) => h.workflowId === `${BATCH}/${id}`)) ? all : undefined;
      },
      30_000,
    );
    expect(histories.some((h) => h.workflowId === `batch/${BATCH}`)).toBe(true);
    const historyHits = histories
      .map((h: StoredHistory) => ({ id: `${h.workflowId} ${h.runId}`, found: findForms(h.bytes, FORMS) }))
      .filter((h) => h.found.length > 0);
    expect(historyHits).toEqual([]);
    // Positive controls: the histories hold the payloads (a prompt) and the error paths (the 401's detail).
    const allHistoryBytes = Buffer.concat(histories.map((h) => h.bytes));
    expect(allHistoryBytes.includes(Buffer.from('a lighthouse on a basalt cliff at dusk'))).toBe(true);
    expect(allHistoryBytes.includes(Buffer.from('api_key_invalid'))).toBe(true);

    // 2. The process list: no command line ever held the key; the worker's environment does (the control), and
    // no other process's environment.
    const now = await scanProcesses(FORMS);
    for (const p of now) if (!seen.has(p.pid)) seen.set(p.pid, p);
    expect(cmdlineHits.concat(now.filter((p) => p.cmdlineHits.length > 0))).toEqual([]);
    const workerEntry = now.find((p) => p.pid === worker!.pid);
    expect(workerEntry?.environHits).toContain('raw');
    const otherEnvirons = now.filter((p) => p.pid !== worker!.pid && (p.environHits?.length ?? 0) > 0);
    expect(otherEnvirons).toEqual([]);
    // The sampler did see the CLI and the server while they ran (so their command lines were searched).
    const commandLines = [...seen.values()].map((p) => p.cmdline);
    expect(commandLines.some((c) => c.includes(BIN) && c.includes(' run '))).toBe(true);
    expect(commandLines.some((c) => c.includes('start-dev'))).toBe(true);

    // 3. Logs and files: stop the worker and the server so that every line and page is written, then search
    // every file under the test folder: logs, results, images, gallery, the server's SQLite, the simulator state.
    await worker!.stop();
    await server!.stop();
    await sim!.close();
    sim = undefined;
    const workerLog = await worker!.log();
    expect(workerLog).toMatch(/worker polling/);
    expect(findForms(workerLog, FORMS)).toEqual([]);
    expect((await server!.log()).length).toBeGreaterThan(0);
    const files = (await walkFiles(dir)).map((f) => path.relative(dir, f));
    for (const expected of ['logs/worker.log', 'logs/temporal.log', 'logs/cli.log', 'temporal.sqlite']) {
      expect(files).toContain(expected);
    }
    expect(files).toContain('simulator-state.json');
    expect(files.filter((f) => f.endsWith('.png')).length).toBeGreaterThanOrEqual(5);
    for (const f of [written.resultsCsv, written.resultsJsonl, written.errorsCsv, written.gallery]) {
      expect(files).toContain(path.relative(dir, f));
    }
    const hits = await scanFiles(dir, FORMS);
    expect([...hits.keys()]).toEqual([path.join('control', 'planted-key.txt')]);
    expect(hits.get(path.join('control', 'planted-key.txt'))).toEqual(expect.arrayContaining(['raw', 'middle']));
    console.log(
      `[secret-scan] ${histories.length} histories (${allHistoryBytes.length} bytes), ${files.length} files, ` +
        `${seen.size} processes, ${workerLog.split('\n').length} worker log lines searched; ${FORMS.length} forms`,
    );
  });
});
