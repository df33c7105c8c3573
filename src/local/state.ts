import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/** What server.json says of the local Temporal server. */
export interface ServerState {
  pid: number;
  /** `127.0.0.1:<port>` of its gRPC front end. */
  address: string;
  port: number;
  /** The Web UI's port; the next start takes the same ports again when they are free. */
  uiPort: number;
  uiUrl: string;
  /** ISO 8601. */
  startedAt: string;
}

/** What worker.json says of the local worker. */
export interface WorkerState {
  pid: number;
  /** The server it polls. */
  address: string;
  /** ISO 8601. */
  startedAt: string;
  /** ISO 8601; rewritten every {@link WORKER_BEAT_MS}: older than {@link WORKER_STALE_MS} is a worker that is gone. */
  beatAt: string;
  /** How long it lets its activities finish once told to stop (its `IMAGEBATCH_SHUTDOWN_GRACE`). */
  shutdownGraceMs: number;
  /** The settings it runs with, each a salted hash (src/local/settings.ts), never a value. */
  settings: { salt: string; hashes: Record<string, string> };
}

export const WORKER_BEAT_MS = 5_000;
export const WORKER_STALE_MS = 30_000;

/** Reads a state file; undefined when it is missing or torn (a crash while writing). */
export function readState<T>(file: string): T | undefined {
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as T;
  } catch {
    return undefined;
  }
}

/** Writes a state file whole or not at all (a temporary file renamed over it). */
export function writeState(file: string, state: object): void {
  mkdirSync(path.dirname(file), { recursive: true });
  const temporary = `${file}.${process.pid}.tmp`;
  writeFileSync(temporary, `${JSON.stringify(state, null, 2)}\n`, { mode: 0o600 });
  renameSync(temporary, file);
}

export function removeState(file: string): void {
  rmSync(file, { force: true });
}
