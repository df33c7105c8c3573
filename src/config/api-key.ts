import { readFileSync } from 'node:fs';
import { API_KEY_ENV, API_KEY_FILE_ENV, ApiKeyError, assertApiKeyFormat } from '../api/api-key';
import { unreadableFile } from './redact';

/**
 * Reads the key from `IMAGEGEN_API_KEY`, or from the file named by `IMAGEGEN_API_KEY_FILE` (one trailing
 * newline is removed), and checks its format. Exactly one of the two must be set.
 */
export function loadApiKey(
  env: Readonly<Record<string, string | undefined>> = process.env,
  readFile: (path: string) => string = (p) => readFileSync(p, 'utf8'),
): string {
  const direct = env[API_KEY_ENV];
  const file = env[API_KEY_FILE_ENV];
  const hasDirect = direct !== undefined && direct !== '';
  const hasFile = file !== undefined && file.trim() !== '';
  if (hasDirect && hasFile) throw new ApiKeyError(`set only one of ${API_KEY_ENV} and ${API_KEY_FILE_ENV}, not both`);
  if (hasDirect) return assertApiKeyFormat(stripNewline(direct), API_KEY_ENV);
  if (hasFile) {
    let text: string;
    try {
      text = readFile(file.trim());
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? 'error';
      // The file's name is not shown: it may be the key itself, put in the wrong variable.
      throw new ApiKeyError(`${API_KEY_FILE_ENV}: ${unreadableFile(file.trim(), code, API_KEY_ENV)}`);
    }
    return assertApiKeyFormat(stripNewline(text), `the file named by ${API_KEY_FILE_ENV}`);
  }
  throw new ApiKeyError(`no API key: set ${API_KEY_ENV} or ${API_KEY_FILE_ENV} in the worker's environment`);
}

function stripNewline(s: string): string {
  return s.replace(/\r?\n$/, '');
}
