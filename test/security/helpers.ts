import { spawn, type ChildProcess } from 'node:child_process';
import { openSync, closeSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Connection } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { loadToolchainOverrides } from '../../src/config/toolchain-config';
import { requireTemporalCli } from '../../src/temporal/toolchain';
import { freePort } from '../../src/util/net';
import { REPO_ROOT } from '../helpers/dist';
import { stopChild } from '../helpers/child-process';

/**
 * Helpers of the security tests: the forms a secret can take, scanners for bytes, files, workflow histories and
 * the process list, and the dev server and the worker as child processes whose every output line goes to a file
 * (the shared helpers keep only a tail, and a scan must see everything).
 */

/** One way a secret could be written down. */
export interface SecretForm {
  name: string;
  needle: Buffer;
}

/**
 * The secret raw, URL-encoded, hex, and base64 / base64url at each of the three byte alignments it can have inside
 * a longer encoded text (only the characters that depend on the secret alone), plus a distinctive middle part that
 * would catch a truncated or partly masked copy.
 */
export function secretForms(secret: string, middle: string): SecretForm[] {
  const bytes = Buffer.from(secret, 'utf8');
  const forms: SecretForm[] = [
    { name: 'raw', needle: bytes },
    { name: 'url-encoded', needle: Buffer.from(encodeURIComponent(secret), 'utf8') },
    { name: 'hex', needle: Buffer.from(bytes.toString('hex'), 'utf8') },
    { name: 'middle', needle: Buffer.from(middle, 'utf8') },
  ];
  for (let shift = 0; shift < 3; shift++) {
    const b64 = Buffer.concat([Buffer.alloc(shift), bytes]).toString('base64');
    const inner = b64.slice(Math.ceil((8 * shift) / 6), Math.floor((8 * (shift + bytes.length)) / 6));
    forms.push({ name: `base64@${shift}`, needle: Buffer.from(inner, 'utf8') });
    forms.push({ name: `base64url@${shift}`, needle: Buffer.from(inner.replace(/\+/g, '-').replace(/\//g, '_')) });
  }
  return forms;
}

/** Names of the forms found in `haystack`. */
export function findForms(haystack: Buffer | string, forms: readonly SecretForm[]): string[] {
  const bytes = typeof haystack === 'string' ? Buffer.from(haystack, 'utf8') : haystack;
  return forms.filter((f) => bytes.includes(f.needle)).map((f) => f.name);
}

/** Every regular file below `dir`. */
export async function walkFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true });
  const nested = await Promise.all(
    entries.map(async (e) => {
      const full = path.join(dir, e.name);
      if (e.isDirectory()) return walkFiles(full);
      return e.isFile() ? [full] : [];
    }),
  );
  return nested.flat();
}

/** Files below `dir` that hold a form of the secret, with the forms found. */
export async function scanFiles(dir: string, forms: readonly SecretForm[]): Promise<Map<string, string[]>> {
  const hits = new Map<string, string[]>();
  for (const file of await walkFiles(dir)) {
    const found = findForms(await readFile(file), forms);
    if (found.length > 0) hits.set(path.relative(dir, file), found);
  }
  return hits;
}

/** One process as /proc shows it. */
export interface ProcessEntry {
  pid: number;
  /** Arguments joined by spaces. */
  cmdline: string;
  cmdlineHits: string[];
  /** Undefined when the environment could not be read (another user's process). */
  environHits?: string[];
}

/** Every process of the machine: its command line and whether it or its environment holds a form of the secret. */
export async function scanProcesses(forms: readonly SecretForm[]): Promise<ProcessEntry[]> {
  const pids = (await readdir('/proc')).filter((name) => /^\d+$/.test(name)).map(Number);
  const out: ProcessEntry[] = [];
  for (const pid of pids) {
    const cmdline = await readFile(`/proc/${pid}/cmdline`).catch(() => undefined);
    if (cmdline === undefined) continue; // gone since the listing
    const environ = await readFile(`/proc/${pid}/environ`).catch(() => undefined);
    out.push({
      pid,
      cmdline: cmdline.toString('utf8').split('\0').join(' ').trim(),
      cmdlineHits: findForms(cmdline, forms),
      ...(environ === undefined ? {} : { environHits: findForms(environ, forms) }),
    });
  }
  return out;
}

/** A workflow execution and its whole history, proto-encoded (every payload, failure and header as stored). */
export interface StoredHistory {
  workflowId: string;
  runId: string;
  type: string;
  history: temporal.api.history.v1.IHistory;
  bytes: Buffer;
}

/**
 * Every execution of the namespace (all runs, open and closed) with its history, read through the raw gRPC service
 * so that nothing is decoded on the way: what the server stores is what is searched.
 */
export async function fetchAllHistories(connection: Connection, namespace = 'default'): Promise<StoredHistory[]> {
  const service = connection.workflowService;
  const out: StoredHistory[] = [];
  let listToken: Uint8Array | undefined;
  do {
    const page = await service.listWorkflowExecutions({ namespace, pageSize: 100, nextPageToken: listToken });
    for (const info of page.executions) {
      const execution = { workflowId: info.execution?.workflowId ?? '', runId: info.execution?.runId ?? '' };
      const events: temporal.api.history.v1.IHistoryEvent[] = [];
      let historyToken: Uint8Array | undefined;
      do {
        const res = await service.getWorkflowExecutionHistory({ namespace, execution, nextPageToken: historyToken });
        events.push(...(res.history?.events ?? []));
        historyToken = res.nextPageToken?.length ? res.nextPageToken : undefined;
      } while (historyToken);
      const history = { events };
      const bytes = Buffer.from(temporal.api.history.v1.History.encode(history).finish());
      out.push({ ...execution, type: info.type?.name ?? '', history, bytes });
    }
    listToken = page.nextPageToken?.length ? page.nextPageToken : undefined;
  } while (listToken);
  return out;
}

/** A payload found in a history, with where it sits (`events.3.workflowExecutionStartedEventAttributes...`). */
export interface FoundPayload {
  path: string;
  payload: temporal.api.common.v1.IPayload;
}

/** Every payload in a decoded history object: any object with a `metadata` map and `data` bytes. */
export function payloadsIn(value: unknown, at = ''): FoundPayload[] {
  if (value === null || typeof value !== 'object' || value instanceof Uint8Array) return [];
  const record = value as Record<string, unknown>;
  if (record.data instanceof Uint8Array && typeof record.metadata === 'object' && record.metadata !== null) {
    return [{ path: at, payload: record }];
  }
  return Object.entries(record).flatMap(([k, v]) => payloadsIn(v, at ? `${at}.${k}` : k));
}

/** A child process whose stdout and stderr go, whole, to a log file. */
export class LoggedProcess {
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;

  private constructor(
    private readonly child: ChildProcess,
    /** The file that receives every byte the process prints. */
    readonly logFile: string,
  ) {
    this.exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  }

  static spawn(command: string, args: readonly string[], options: { env: NodeJS.ProcessEnv; logFile: string }) {
    const fd = openSync(options.logFile, 'a');
    try {
      const child = spawn(command, args, { cwd: REPO_ROOT, env: options.env, stdio: ['ignore', fd, fd] });
      return new LoggedProcess(child, options.logFile);
    } finally {
      closeSync(fd); // the child holds its own copy
    }
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  async log(): Promise<string> {
    return readFile(this.logFile, 'utf8').catch(() => '');
  }

  /** Resolves once the log matches `pattern`; rejects (with the log) when the process exits first or time runs out. */
  async waitForLog(pattern: RegExp, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const log = await this.log();
      if (pattern.test(log)) return;
      if (!this.running) throw new Error(`${this.logFile}: the process exited before ${pattern}:\n${log.slice(-4000)}`);
      if (Date.now() > deadline) throw new Error(`${this.logFile}: no ${pattern} within ${timeoutMs} ms`);
      await sleep(100);
    }
  }

  /** SIGTERM, then SIGKILL after `graceMs`; resolves once the process has gone. */
  async stop(graceMs = 10_000): Promise<void> {
    await stopChild(this.child, this.exited, graceMs);
  }
}

/**
 * The pinned `temporal server start-dev` on a free loopback port, with its state in `dbFile` and every line it
 * prints (at `info`, more than the project's default `error`) in `logFile`. Resolves once the default namespace
 * answers.
 */
export async function startLoggedDevServer(options: {
  dbFile: string;
  logFile: string;
  env: NodeJS.ProcessEnv;
}): Promise<{ process: LoggedProcess; address: string }> {
  const port = await freePort('127.0.0.1');
  const args = ['server', 'start-dev', '--ip', '127.0.0.1', '--port', String(port), '--headless'];
  args.push('--log-level', 'info', '--db-filename', options.dbFile);
  const server = LoggedProcess.spawn(requireTemporalCli(loadToolchainOverrides().temporalCli), args, {
    env: options.env,
    logFile: options.logFile,
  });
  const address = `127.0.0.1:${port}`;
  const deadline = Date.now() + 90_000;
  for (;;) {
    try {
      const connection = await Connection.connect({ address, connectTimeout: 1000 });
      try {
        await connection.workflowService.describeNamespace({ namespace: 'default' });
        return { process: server, address };
      } finally {
        await connection.close();
      }
    } catch (err) {
      if (!server.running || Date.now() > deadline) {
        await server.stop();
        throw new Error(`the dev server did not start: ${String(err)}\n${(await server.log()).slice(-4000)}`);
      }
      await sleep(250);
    }
  }
}

/** A random string of letters and digits. */
export function randomAlnum(length: number): string {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
  return Array.from({ length }, () => alphabet[Math.floor(Math.random() * alphabet.length)]).join('');
}
