import { DISCOVERED_SOURCE_SUFFIX } from '../api/schemas';
import type { RecordFindings } from '../api/record-findings';
import type { ImageRef, PollCreationResult } from '../model';
import { SERVICE_CONFIG_ENV } from '../config/service-config';
import { type ServiceConfig } from '../api/service-config';
import { CheckResult, type DoctorCheck } from './types';

/** The lines of `doctor --spend-one` about its record: where each field was, its cost, its images and their host. */

/** `at x` for a field found at a configured path, `at x (not configured)` for one found under a common name. */
function where(found: { at: string; configured: boolean } | undefined, what: string): string {
  if (found === undefined) return `no ${what} found`;
  return `${what} at ${found.at}${found.configured ? '' : ' (not configured: see the settings below)'}`;
}

/** Where the record sits and where its id, status, error and cost were found. */
export function recordFieldsCheck(found: RecordFindings): DoctorCheck {
  const parts = [
    found.wrapper === undefined ? 'at the root of the body' : `wrapped in ${found.wrapper}`,
    where(found.id, 'id'),
    where(found.status, 'status'),
    where(found.cost, 'cost'),
    ...(found.error ? [where(found.error, 'error')] : []),
  ];
  const guessed = [found.id, found.status, found.cost, found.error].some((f) => f !== undefined && !f.configured);
  return {
    name: 'record fields',
    result: guessed ? CheckResult.Guess : CheckResult.Ok,
    found: `${parts[0]}; ${parts.slice(1).join(', ')}`,
  };
}

/** The record itself (inside its wrapper), as the findings located it. */
export function recordOf(body: unknown, found: RecordFindings): Record<string, unknown> {
  const obj = (v: unknown) =>
    v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
  return found.wrapper === undefined ? obj(body) : obj(obj(body)[found.wrapper]);
}

/** The cost as mapped, or as found elsewhere, or unknown. */
export function costCheck(
  result: PollCreationResult,
  found: RecordFindings | undefined,
  config: ServiceConfig,
): DoctorCheck {
  const variable = SERVICE_CONFIG_ENV.costFields;
  if (result.costUsd !== undefined && found?.cost?.configured !== false) {
    return {
      name: 'mapped cost',
      result: CheckResult.Ok,
      found: `$${result.costUsd}, read at ${found?.cost?.at ?? 'a cost field'}`,
    };
  }
  if (found?.cost) {
    return {
      name: 'mapped cost',
      result: CheckResult.Guess,
      found: `$${found.cost.usd} at ${found.cost.at}, which ${variable} does not name: a batch shows the catalog's price`,
      hint: `write ${variable} below`,
    };
  }
  return {
    name: 'mapped cost',
    result: CheckResult.Guess,
    found: `unknown: the record has no cost at ${variable} (${config.costFields.slice(0, 4).join(', ')}, ...)`,
    hint: `if one of the keys above holds the cost, set ${variable}; else the catalog's price or --price is used`,
  };
}

/** How many images, and where: at a configured path, or found by searching the record. */
export function imagesCheck(images: ImageRef[], found: RecordFindings | undefined): DoctorCheck {
  const sources = images.map((i) => i.source ?? '');
  const discovered = sources.some((s) => s.endsWith(DISCOVERED_SOURCE_SUFFIX));
  const at = [...new Set(sources.map((s) => s.replace(DISCOVERED_SOURCE_SUFFIX, '')))].slice(0, 4).join(', ');
  const count = `${images.length} image reference(s) found${at === '' ? '' : ` at ${at}`}`;
  if (!discovered) return { name: 'mapped images', result: CheckResult.Ok, found: count };
  return {
    name: 'mapped images',
    result: CheckResult.Warn,
    found: `${count}, not at ${SERVICE_CONFIG_ENV.imageFields}: found by searching the record`,
    hint:
      found?.images.configured === false
        ? `a batch searches the same way, but a setting makes it certain: write ${SERVICE_CONFIG_ENV.imageFields} below`
        : undefined,
  };
}

/** The hosts the images are on; downloads go without the key. */
export function imageHostCheck(images: ImageRef[], config: ServiceConfig): DoctorCheck {
  const hosts = [...new Set(images.map(hostOf))];
  const baseHost = new URL(config.baseUrl).host;
  return {
    name: 'image host',
    result: CheckResult.Ok,
    found: `${hosts.join(', ')}${hosts.every((h) => h === baseHost) ? ' (the base URL host)' : ` (not the base URL host ${baseHost})`}; downloaded without the key`,
  };
}

function hostOf(image: ImageRef): string {
  if (image.url.startsWith('data:')) return 'inline (data: URL)';
  return URL.canParse(image.url) ? new URL(image.url).host : 'not a URL';
}
