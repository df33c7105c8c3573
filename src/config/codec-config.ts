import { readFileSync } from 'node:fs';
import { unreadableFile } from './redact';
import { ConfigError } from './service-config';

/**
 * The payload encryption keys, from the environment only. Every message here names the variable and what is
 * wrong (position, length) without quoting any part of a key.
 */

export const PAYLOAD_KEY_ENV = 'IMAGEBATCH_PAYLOAD_KEY';
export const PAYLOAD_KEY_FILE_ENV = 'IMAGEBATCH_PAYLOAD_KEY_FILE';
/** The variable that may hold the codec server's token (src/codec/codec-server.ts; otherwise it makes one). */
export const CODEC_TOKEN_ENV = 'IMAGEBATCH_CODEC_TOKEN';

/** AES-256: 32 bytes, written as standard base64 (44 characters, one `=`), as `openssl rand -base64 32` prints. */
export const PAYLOAD_KEY_BYTES = 32;
const BASE64_OF_32_BYTES = /^[A-Za-z0-9+/]{43}=$/;

/** The configured keys: the first encrypts, every one decrypts (so a key can be rotated without a gap). */
export interface PayloadKeys {
  /** 32-byte keys, newest first. */
  keys: Buffer[];
  /** Where they came from (a variable name or `the file named by ...`), for messages. */
  source: string;
}

/**
 * Reads the keys from `IMAGEBATCH_PAYLOAD_KEY` or from the file named by `IMAGEBATCH_PAYLOAD_KEY_FILE` (at most
 * one of the two). Several keys are separated by commas or new lines, newest first. Returns undefined when
 * neither is set (payloads then travel unencrypted); throws a {@link ConfigError} naming the variable otherwise.
 */
export function loadPayloadKeys(
  env: Readonly<Record<string, string | undefined>> = process.env,
  readFile: (path: string) => string = (p) => readFileSync(p, 'utf8'),
): PayloadKeys | undefined {
  const direct = env[PAYLOAD_KEY_ENV]?.trim() ?? '';
  const file = env[PAYLOAD_KEY_FILE_ENV]?.trim() ?? '';
  if (direct !== '' && file !== '') {
    throw new ConfigError(PAYLOAD_KEY_ENV, `set only one of ${PAYLOAD_KEY_ENV} and ${PAYLOAD_KEY_FILE_ENV}, not both`);
  }
  if (direct !== '') return { keys: parseKeys(direct, PAYLOAD_KEY_ENV, PAYLOAD_KEY_ENV), source: PAYLOAD_KEY_ENV };
  if (file === '') return undefined;
  let text: string;
  try {
    text = readFile(file);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'error';
    // The file's name is not shown: it may be the key itself, put in the wrong variable.
    throw new ConfigError(PAYLOAD_KEY_FILE_ENV, unreadableFile(file, code, PAYLOAD_KEY_ENV));
  }
  const source = `the file named by ${PAYLOAD_KEY_FILE_ENV}`;
  return { keys: parseKeys(text, PAYLOAD_KEY_FILE_ENV, source), source };
}

function parseKeys(text: string, variable: string, source: string): Buffer[] {
  const items = text
    .split(/[,\n]/)
    .map((s) => s.trim())
    .filter((s) => s !== '');
  if (items.length === 0) throw new ConfigError(variable, `${source} holds no key`);
  const keys = items.map((item, i) => {
    const which = items.length > 1 ? `key ${i + 1} of ${items.length} in ${source}` : `the key in ${source}`;
    if (!BASE64_OF_32_BYTES.test(item)) {
      const bytes = /^[A-Za-z0-9+/=_-]+$/.test(item) ? `, ${Buffer.from(item, 'base64').length} bytes` : '';
      throw new ConfigError(
        variable,
        `${which} is not the base64 of ${PAYLOAD_KEY_BYTES} bytes (${item.length} characters${bytes}; ` +
          `expected 44 characters ending in "=", as printed by \`openssl rand -base64 32\`)`,
      );
    }
    return Buffer.from(item, 'base64');
  });
  const seen = new Set<string>();
  keys.forEach((key, i) => {
    const hex = key.toString('hex');
    if (seen.has(hex)) throw new ConfigError(variable, `key ${i + 1} in ${source} repeats an earlier key`);
    seen.add(hex);
  });
  return keys;
}
