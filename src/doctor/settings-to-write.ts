import { pathOfLocation, StatusMeaning, type RecordFindings } from '../api/record-findings';
import { recordPathProblem } from '../api/record-path';
import { SERVICE_CONFIG_ENV } from '../config/service-config';
import { type ServiceConfig } from '../api/service-config';
import type { SettingToWrite } from './types';

/**
 * The settings a paid test's record calls for, only those that differ from the configured ones: a success word the
 * success set lacks, and where the id, status, images and cost were found when not at the configured paths. Values
 * are field paths and status words, never a value of the record.
 */

/** A status word written into a setting: letters, digits and a few marks, so that it is safe in a shell and a file. */
const WRITABLE_WORD = /^[A-Za-z0-9 _.:-]{1,64}$/;

/** `imageJudged`: the record holds an image judged by its bytes (only then is a status in no set a success). */
export function recordSettings(found: RecordFindings, config: ServiceConfig, imageJudged = false): SettingToWrite[] {
  const out: SettingToWrite[] = [];
  const path = (variable: string, at: string, why: string) => {
    const value = pathOfLocation(at);
    if (recordPathProblem(value) === undefined) out.push({ variable, value, why });
  };
  if (found.id && !found.id.configured)
    path(SERVICE_CONFIG_ENV.idFields, found.id.at, 'where the record carries its id');
  const status = found.status;
  if (status && !status.configured) {
    path(SERVICE_CONFIG_ENV.statusFields, status.at, 'where the record carries its status');
  }
  if (status?.meaning === StatusMeaning.InFlight && imageJudged && WRITABLE_WORD.test(status.word.trim())) {
    out.push({
      variable: SERVICE_CONFIG_ENV.successStatuses,
      value: [...config.successStatuses, status.word.trim().toLowerCase()].join(','),
      why: `"${status.word}" came with an image (judged by its bytes): a success`,
    });
  }
  const image = found.images.at[0];
  if (!found.images.configured && image !== undefined) {
    path(SERVICE_CONFIG_ENV.imageFields, image, 'where the record carries its images');
  }
  if (found.cost && !found.cost.configured) {
    path(SERVICE_CONFIG_ENV.costFields, found.cost.at, 'where the record carries its cost');
  }
  return out;
}

/** `NAME='value'`: a line for an env file, or for a shell (after `set -a`); `'` inside is written `'\''`. */
export function settingLine(setting: SettingToWrite): string {
  return `${setting.variable}='${setting.value.replace(/'/g, `'\\''`)}'`;
}
