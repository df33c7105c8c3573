import { describe, expect, it } from 'vitest';
import { devServerEnv } from '../../src/config/dev-server-env';

/** Issue #30 item 8, leak 2: the dev server was started with the CLI's whole environment, the key included. */

const FAKE_KEY = 'img_live_DevServerEnvFake0123456789abcdefghijKLMN';

const CLI_ENV = {
  PATH: '/usr/local/bin:/usr/bin',
  HOME: '/home/u',
  TMPDIR: '/tmp/u',
  LANG: 'en_GB.UTF-8',
  LC_ALL: 'C.UTF-8',
  LC_TIME: 'en_DK.UTF-8',
  TZ: 'Europe/Paris',
  XDG_CONFIG_HOME: '/home/u/.config',
  IMAGEGEN_API_KEY: FAKE_KEY,
  IMAGEGEN_API_KEY_FILE: '/run/secrets/imagegen-key',
  IMAGEGEN_BASE_URL: 'https://api.example.com/v1',
  IMAGEBATCH_LEDGER: 'postgres://ledger:hunter2-password@db.example/ledger',
  IMAGEBATCH_LEDGER_PASSWORD_FILE: '/run/secrets/ledger',
  IMAGEBATCH_PAYLOAD_KEY: 'q1w2e3r4t5y6u7i8o9p0a1s2d3f4g5h6j7k8l9z0x1c=',
  IMAGEBATCH_PAYLOAD_KEY_FILE: '/run/secrets/payload',
  IMAGEBATCH_CODEC_TOKEN: 'codec-token-0123456789abcdefghijklmnopqrstuv',
  TEMPORAL_API_KEY: 'temporal-cloud-api-key',
  TEMPORAL_ADDRESS: 'cloud.example:7233',
  AWS_SECRET_ACCESS_KEY: 'aws-secret',
  GITHUB_TOKEN: 'ghp_token',
  NODE_OPTIONS: '--require /tmp/evil.js',
  SOMETHING_ELSE: 'x',
  UNSET: undefined,
};

describe('the dev server environment', () => {
  it('is PATH, HOME, TMPDIR, the locale, TZ and the XDG folders, nothing else', () => {
    expect(devServerEnv(CLI_ENV)).toEqual({
      PATH: '/usr/local/bin:/usr/bin',
      HOME: '/home/u',
      TMPDIR: '/tmp/u',
      LANG: 'en_GB.UTF-8',
      LC_ALL: 'C.UTF-8',
      LC_TIME: 'en_DK.UTF-8',
      TZ: 'Europe/Paris',
      XDG_CONFIG_HOME: '/home/u/.config',
    });
  });

  it('holds no value of any secret it was given, and reads names case-insensitively (Windows: Path)', () => {
    const env = devServerEnv({ ...CLI_ENV, PATH: undefined, Path: 'C:\\Windows', SystemRoot: 'C:\\Windows' });
    expect(env).toMatchObject({ Path: 'C:\\Windows', SystemRoot: 'C:\\Windows' });
    const text = JSON.stringify(env);
    for (const name of ['IMAGEGEN_API_KEY', 'IMAGEBATCH_LEDGER', 'IMAGEBATCH_PAYLOAD_KEY', 'TEMPORAL_API_KEY']) {
      expect(text).not.toContain(CLI_ENV[name as keyof typeof CLI_ENV]);
    }
    expect(text).not.toContain('hunter2');
  });
});
