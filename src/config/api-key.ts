import { readFileSync } from 'node:fs';
import { API_KEY_ENV, API_KEY_FILE_ENV, ApiKeyError, assertApiKeyFormat } from '../api/api-key';
import type { Env } from './env';
import { unreadableFile } from './redact';

/**
 * Where the environment says the key is: `direct` when `IMAGEGEN_API_KEY` is set (not empty), `file` when
 * `IMAGEGEN_API_KEY_FILE` names a file (trimmed). Neither is read nor checked here.
 */
function apiKeySources(env: Env): { direct?: string; file?: string } {
  const direct = env[API_KEY_ENV];
  const file = env[API_KEY_FILE_ENV]?.trim();
  return { ...(direct ? { direct } : {}), ...(file ? { file } : {}) };
}

/** Whether the environment names a key (see {@link loadApiKey}), without reading or checking it. */
export function apiKeyNamed(env: Env = process.env): boolean {
  const { direct, file } = apiKeySources(env);
  return direct !== undefined || file !== undefined;
}

/**
 * Reads the key from `IMAGEGEN_API_KEY`, or from the file named by `IMAGEGEN_API_KEY_FILE` (one trailing
 * newline is removed), and checks its format. Exactly one of the two must be set.
 */
export function loadApiKey(
  env: Env = process.env,
  readFile: (path: string) => string = (p) => readFileSync(p, 'utf8'),
): string {
  const { direct, file } = apiKeySources(env);
  if (direct !== undefined && file !== undefined)
    throw new ApiKeyError(`set only one of ${API_KEY_ENV} and ${API_KEY_FILE_ENV}, not both`);
  if (direct !== undefined) return assertApiKeyFormat(stripNewline(direct), API_KEY_ENV);
  if (file !== undefined) {
    let text: string;
    try {
      text = readFile(file);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? 'error';
      // The file's name is not shown: it may be the key itself, put in the wrong variable.
      throw new ApiKeyError(`${API_KEY_FILE_ENV}: ${unreadableFile(file, code, API_KEY_ENV)}`);
    }
    return assertApiKeyFormat(stripNewline(text), `the file named by ${API_KEY_FILE_ENV}`);
  }
  throw new ApiKeyError(`no API key: set ${API_KEY_ENV} or ${API_KEY_FILE_ENV} in the worker's environment`);
}

function stripNewline(s: string): string {
  return s.replace(/\r?\n$/, '');
}
