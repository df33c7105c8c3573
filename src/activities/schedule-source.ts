import { realpath } from 'node:fs/promises';
import path from 'node:path';
import { looksLikeSecret } from '../config/redact';
import { SCHEDULE_SOURCES_ENV } from '../config/service-config';
import { ErrorCode, ImagebatchError } from '../model/errors';
import {
  AddressPolicy,
  EMPTY_ALLOW_LIST,
  parseAllowList,
  refusalOf,
  type DownloadAddressRefusedError,
} from '../api/download-guard';

/**
 * A schedule's source the worker may not read. A URL source goes through the address guard of image downloads
 * (src/api/download-guard.ts: the same allow list, `IMAGEGEN_DOWNLOAD_ALLOW_HOSTS`, and the base URL's host), on
 * every connection, redirects included: `schedule create` refuses it at once, and each run again at fire time.
 */
export class ScheduleSourceRefusedError extends ImagebatchError {
  readonly code = ErrorCode.ScheduleSourceRefused;
}

/** The guard's own words for a refused URL source: the address, its class, and the setting that allows it. */
export function sourceRefusal(url: string, refused: DownloadAddressRefusedError): string {
  return `the batch source ${url} is refused: ${refused.message}`;
}

/**
 * `schedule create`'s check of a URL source's host on this machine: a host the guard refuses throws
 * {@link ScheduleSourceRefusedError}. A host this machine cannot resolve is left to the worker (it may see other
 * names), which checks again at each run.
 */
export async function checkSourceAddress(url: string, policy: AddressPolicy): Promise<void> {
  try {
    await policy.resolve(new URL(url).hostname);
  } catch (err) {
    const refused = refusalOf(err);
    if (refused) throw new ScheduleSourceRefusedError(sourceRefusal(url, refused));
  }
}

/**
 * The address policy of image downloads for these settings (a wrong allow list, which loading the settings
 * refuses, allows nothing).
 */
export function sourceAddressPolicy(config: {
  downloadAllowHosts?: readonly string[];
  baseUrl: string;
}): AddressPolicy {
  const allow = parseAllowList((config.downloadAllowHosts ?? []).join(','));
  return new AddressPolicy({ allow: typeof allow === 'string' ? EMPTY_ALLOW_LIST : allow, baseUrl: config.baseUrl });
}

/** Where a schedule's local source may be, and the secrets' files it may never be. */
export interface SourceFolders {
  /** The schedule's own output folder (`--out`, as the worker sees it): its runs and `runs.jsonl` are below it. */
  scheduleDir: string;
  /** `IMAGEBATCH_SCHEDULE_SOURCES`. */
  allowed: readonly string[];
  /** The files the `*_FILE` settings name. */
  secretFiles: readonly string[];
}

/** `file` with its symbolic links resolved; as written when it is not there (the reader then says it is missing). */
const real = (file: string) => realpath(file).catch(() => path.resolve(file));

const inside = (folder: string, file: string) => {
  const rel = path.relative(folder, file);
  return rel === '' || (!rel.startsWith('..') && !path.isAbsolute(rel));
};

/**
 * The worker's check of a schedule's local source, before it is read: its real path (links resolved) must be in
 * the schedule's own output folder or a folder of `IMAGEBATCH_SCHEDULE_SOURCES`, and never a secret's file. Else
 * {@link ScheduleSourceRefusedError}, naming the path only.
 */
export async function checkSourcePath(source: string, folders: SourceFolders): Promise<void> {
  const file = await real(source);
  const secrets = await Promise.all(folders.secretFiles.map(real));
  if (secrets.includes(file)) {
    throw new ScheduleSourceRefusedError(`the batch source ${source} is refused: it is the file of a secret setting`);
  }
  const roots = await Promise.all([folders.scheduleDir, ...folders.allowed].map(real));
  if (!roots.some((root) => inside(root, file))) {
    throw new ScheduleSourceRefusedError(
      `the batch source ${source} is refused: a schedule reads files only in its own output folder ` +
        `(${folders.scheduleDir}) or a folder of ${SCHEDULE_SOURCES_ENV}: move it there, or set ` +
        `${SCHEDULE_SOURCES_ENV}=${path.dirname(path.resolve(source))} for the worker and the CLI`,
    );
  }
}

/** A quoted value of a message (a cell or a column name, at most 40 characters: `preview`), or a bare word. */
const QUOTED = /"(?:[^"\\]|\\.)*"/g;
// A part of a path (the file's own name, a temporary folder's random suffix) is not a word of the file.
const WORD = /(?<![\w/.+=~-])[A-Za-z0-9_+=~-]{16,}(?![\w/.+=~-])/g;

const hidden = (value: string) => `<a value of ${value.length} characters, not shown>`;

/**
 * A scheduled run's reason for failing, as its history and `runs.jsonl` keep it: each excerpt of the file (a quoted
 * value, or a bare word such as a column name) that looks like a secret (src/config/redact.ts) is replaced by its
 * length.
 */
export function redactedReason(message: string): string {
  return message
    .replace(QUOTED, (quoted) => (looksLikeSecret(quoted.slice(1, -1)) ? hidden(quoted.slice(1, -1)) : quoted))
    .replace(WORD, (word) => (looksLikeSecret(word) ? hidden(word) : word));
}
