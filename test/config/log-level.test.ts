import { describe, expect, it } from 'vitest';
import { ErrorCode } from '../../src/model/errors';
import { ConfigError } from '../../src/config/service-config';
import { LOG_LEVEL_ENV, loadLogLevel } from '../../src/config/log-level';

describe('IMAGEBATCH_LOG_LEVEL', () => {
  it('is warnings and errors only when unset or empty', () => {
    expect(loadLogLevel({})).toBe('WARN');
    expect(loadLogLevel({ [LOG_LEVEL_ENV]: ' ' })).toBe('WARN');
  });

  it('takes debug and warn, in any case', () => {
    expect(loadLogLevel({ [LOG_LEVEL_ENV]: 'debug' })).toBe('DEBUG');
    expect(loadLogLevel({ [LOG_LEVEL_ENV]: ' DEBUG ' })).toBe('DEBUG');
    expect(loadLogLevel({ [LOG_LEVEL_ENV]: 'Warn' })).toBe('WARN');
  });

  it('refuses anything else, naming the variable and the value', () => {
    let caught: unknown;
    try {
      loadLogLevel({ [LOG_LEVEL_ENV]: 'verbose' });
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(ConfigError);
    expect((caught as ConfigError).code).toBe(ErrorCode.ConfigInvalid);
    expect((caught as ConfigError).message).toBe('IMAGEBATCH_LOG_LEVEL: must be debug or warn (got "verbose")');
  });
});
