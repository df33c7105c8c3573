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
