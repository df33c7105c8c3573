import { describe, expect, it } from 'vitest';
import { devServerEnv } from '../../src/config/dev-server-env';
import {
  PROJECT_NAMES,
  SETTING_NAMES,
  UnknownSettingError,
  checkKnownSettings,
  nearestSetting,
  unknownSettings,
} from '../../src/config/known-settings';
import { SERVICE_CONFIG_ENV } from '../../src/config/service-config';
import { WORKER_ENV } from '../../src/config/temporal-config';
import { IMAGEBATCH_LEDGER_ENV, IMAGEBATCH_LEDGER_PASSWORD_FILE_ENV } from '../../src/ledger/location';
import { localTemporalEnv } from '../../src/local/local';
import { ErrorCode } from '../../src/model/errors';

/**
 * Issue 42, point 2: an `IMAGEGEN_*` or `IMAGEBATCH_*` variable imagebatch does not read was ignored in silence (a
 * typo in IMAGEGEN_IDEMPOTENCY_HEADER left the run without the key its user set). The registry of the names it knows,
 * and the nearest setting offered for a misspelt one.
 */

describe('the names imagebatch knows', () => {
  it('hold every setting of the tables that read them, the ledger store’s too', () => {
    for (const name of [...Object.values(SERVICE_CONFIG_ENV), ...Object.values(WORKER_ENV)]) {
      expect(SETTING_NAMES).toContain(name);
    }
    expect(SETTING_NAMES).toContain('IMAGEGEN_IDEMPOTENCY_FIELD');
    // src/config cannot import src/ledger: the registry names its two variables, and these must be them.
    expect(SETTING_NAMES).toEqual(expect.arrayContaining([IMAGEBATCH_LEDGER_ENV, IMAGEBATCH_LEDGER_PASSWORD_FILE_ENV]));
  });

  it('are each ours, once, and a project name is never a setting', () => {
    const all = [...SETTING_NAMES, ...PROJECT_NAMES];
    expect(all.filter((name) => !/^(IMAGEGEN|IMAGEBATCH)_[A-Z0-9_]+$/.test(name))).toEqual([]);
    expect(new Set(all).size).toBe(all.length);
  });
});

describe('unknownSettings', () => {
  it('finds the variables of ours that no setting reads, in any case, and nothing else', () => {
    const env = {
      IMAGEGEN_BASE_URL: 'https://api.example.com/v1',
      IMAGEGEN_IDEMPOTENCY_HEDER: 'X-Idem',
      imagegen_api_key: 'x',
      IMAGEBATCH_TEST_PROJECT: 'unit',
      IMAGEBATCH_FUZZ_SCALE: '20',
      IMAGEGEN_LAG_WINDOW: '   ',
      IMAGEBATCH_GONE: undefined,
      TEMPORAL_ADRESS: 'x',
      PATH: '/usr/bin',
    };
    expect(unknownSettings(env, 'linux')).toEqual(['IMAGEGEN_IDEMPOTENCY_HEDER', 'imagegen_api_key']);
    // Windows reads a variable whatever the case of its name.
    expect(unknownSettings(env, 'win32')).toEqual(['IMAGEGEN_IDEMPOTENCY_HEDER']);
  });
});

describe('nearestSetting', () => {
  it.each([
    ['IMAGEGEN_IDEMPOTENCY_HEDER', 'IMAGEGEN_IDEMPOTENCY_HEADER'],
    ['IMAGEGEN_IDEMPOTENCY_FIELDS', 'IMAGEGEN_IDEMPOTENCY_FIELD'],
    ['IMAGEGEN_IDEMPOTENCY_HAEDER', 'IMAGEGEN_IDEMPOTENCY_HEADER'],
    ['imagegen_base_url', 'IMAGEGEN_BASE_URL'],
    ['IMAGEBATCH_BASE_URL', 'IMAGEGEN_BASE_URL'],
    ['IMAGEGEN_RATE_LIMIT', 'IMAGEBATCH_RATE_LIMIT'],
    ['IMAGEGEN_MAX_DOWNLOAD_BYTE', 'IMAGEGEN_MAX_DOWNLOAD_BYTES'],
  ])('%s is a typo of %s', (typo, setting) => {
    expect(nearestSetting(typo)).toBe(setting);
  });

  it.each([
    ['a setting of no version near any', 'IMAGEGEN_LAG_WINDOW_MS'],
    ['a short name', 'IMAGEGEN_ID'],
    ['a typo of a project name', 'IMAGEBATCH_FUZZ_SCAL'],
    ['nearer a project name than a setting', 'IMAGEBATCH_TEMPORAL_POR'],
  ])('%s gets none: %s', (_what, name) => {
    expect(nearestSetting(name)).toBeUndefined();
  });

  it('never offers a project name', () => {
    for (const name of PROJECT_NAMES) expect(nearestSetting(`${name}S`)).not.toBe(name);
  });
});

describe('checkKnownSettings', () => {
  const refusal = (env: Record<string, string>) => {
    try {
      checkKnownSettings(env, 'linux');
    } catch (err) {
      return err;
    }
    return undefined;
  };

  it('passes an environment of settings and project names', () => {
    expect(refusal({ IMAGEGEN_IDEMPOTENCY_FIELD: 'meta.key', IMAGEBATCH_TEST_CLUSTER: '1', HOME: '/h' })).toBe(
      undefined,
    );
  });

  it('refuses a misspelt one in one line, naming it and the setting meant', () => {
    const err = refusal({ IMAGEGEN_IDEMPOTENCY_HEDER: 'X-Idem' });
    expect(err).toBeInstanceOf(UnknownSettingError);
    expect((err as UnknownSettingError).code).toBe(ErrorCode.SettingUnknown);
    expect((err as Error).message).toBe(
      'IMAGEGEN_IDEMPOTENCY_HEDER is not a setting of imagebatch (did you mean IMAGEGEN_IDEMPOTENCY_HEADER?): ' +
        'unset it or correct its name',
    );
  });

  it('names every one, each with its nearest setting when there is one', () => {
    expect((refusal({ IMAGEGEN_LAG_WINDOW_MS: '60000', IMAGEBATCH_RATE_LIMT: '5' }) as Error).message).toBe(
      'IMAGEBATCH_RATE_LIMT (did you mean IMAGEBATCH_RATE_LIMIT?) and IMAGEGEN_LAG_WINDOW_MS are not settings of ' +
        'imagebatch: unset them or correct their names',
    );
  });

  it('does not show a name that looks like a key', () => {
    const name = 'IMAGEGEN_API_KEY img_live_Xk29fLq8Zp3RmW7tYv5B';
    const message = (refusal({ [name]: 'x' }) as Error).message;
    expect(message).toBe(
      `<a name of ${name.length} characters, not shown> is not a setting of imagebatch: unset it or correct its name`,
    );
  });
});

describe('local mode', () => {
  const cli = {
    PATH: '/usr/bin',
    HOME: '/home/u',
    IMAGEGEN_IDEMPOTENCY_FIELD: 'input.request_id',
    IMAGEGEN_API_KEY_FILE: '/run/secrets/key',
    IMAGEBATCH_RATE_LIMIT: '5',
    TEMPORAL_ADDRESS: 'cloud.example:7233',
  };

  it("hands the worker the command's settings as before, and they pass its check", () => {
    const worker = localTemporalEnv(cli, '127.0.0.1:7234');
    expect(worker).toMatchObject({
      IMAGEGEN_IDEMPOTENCY_FIELD: 'input.request_id',
      IMAGEGEN_API_KEY_FILE: '/run/secrets/key',
      IMAGEBATCH_RATE_LIMIT: '5',
      TEMPORAL_ADDRESS: '127.0.0.1:7234',
    });
    expect(unknownSettings(worker)).toEqual([]);
  });

  it('hands the Temporal server none of ours', () => {
    expect(Object.keys(devServerEnv(cli)).sort()).toEqual(['HOME', 'PATH']);
  });
});
