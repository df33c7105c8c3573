import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { KeyCheckResult } from '../model';

/**
 * The record of paid tests (`doctor-spend-one.json`): one entry per idempotency key, written before the request
 * leaves, so that a re-run never pays twice; and the key paths of a record, which doctor shows instead of values.
 */

export interface RecordEntry {
  model: string;
  /** When the key was first sent (ms since the epoch). */
  sentAt: number;
  creationId?: string;
  /** The key sent a second time to prove the service honours it (src/doctor/key-check.ts). */
  check?: RecordedCheck;
}

/** The check's place in the record: when its send left (written before), and what it showed once known. */
export interface RecordedCheck {
  sentAt: number;
  result?: KeyCheckResult;
  /** The second creation the service made, when it did not honour the key. */
  creationId?: string;
  costUsd?: number;
}

/** Key paths of a record shown at most. */
const SHAPE_PATHS = 60;

export async function readRecords(file: string): Promise<Record<string, RecordEntry>> {
  try {
    const parsed = JSON.parse(await readFile(file, 'utf8')) as unknown;
    return parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)
      ? (parsed as Record<string, RecordEntry>)
      : {};
  } catch {
    return {};
  }
}

/** Written whole to a temporary file and renamed, so that a crash leaves the old record or the new one. */
export async function writeRecords(file: string, records: Record<string, RecordEntry>): Promise<void> {
  await mkdir(path.dirname(file), { recursive: true });
  const temp = `${file}.${process.pid}.tmp`;
  await writeFile(temp, `${JSON.stringify(records, null, 2)}\n`);
  await rename(temp, file);
}

/**
/**
 * The key paths of a JSON value, never a value: `id`, `images[].url`, `billing.amount`. Array elements are merged
 * (the first few), depth and count are bounded.
 */
export function keyPaths(value: unknown, prefix = '', depth = 0, out: string[] = []): string[] {
  if (out.length >= SHAPE_PATHS || depth > 4) return out;
  if (Array.isArray(value)) {
    const before = out.length;
    for (const item of value.slice(0, 4)) keyPaths(item, `${prefix}[]`, depth + 1, out);
    if (out.length === before && prefix !== '' && !out.includes(`${prefix}[]`)) out.push(`${prefix}[]`);
    return out;
  }
  if (value === null || typeof value !== 'object') {
    if (prefix !== '' && !out.includes(prefix)) out.push(prefix);
    return out;
  }
  for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
    if (out.length >= SHAPE_PATHS) break;
    const name = k.length > 40 ? `${k.slice(0, 37)}...` : k;
    keyPaths(v, prefix === '' ? name : `${prefix}.${name}`, depth + 1, out);
  }
  return out;
}
