import { describe, expect, it } from 'vitest';
import { ApiKeyError } from '../../src/api/api-key';
import { DownloadAddressRefusedError } from '../../src/api/download-guard';
import { RequestTimeoutError } from '../../src/api/http';
import { RequestShapeError } from '../../src/api/request-shape';
import { BatchFileError, BatchFileErrorReason } from '../../src/batch';
import { PayloadCodecError, PayloadCodecErrorCode } from '../../src/codec';
import { ConfigError } from '../../src/config/service-config';
import { MetricsSetupError } from '../../src/metrics/runtime';
import { ErrorCode, hasErrorCode, ImagebatchError } from '../../src/model/errors';
import { SimulatorConfigError } from '../../src/simulator/config';
import { ClientGoneError } from '../../src/simulator/http';

// The CLI's own errors are covered with the CLI; the codec server's private RequestError by its wire answers
// (test/security/codec-server.test.ts).
const cases: [name: string, code: ErrorCode, error: ImagebatchError][] = [
  ['ConfigError', ErrorCode.ConfigInvalid, new ConfigError('IMAGEGEN_BASE_URL', 'must be a URL')],
  ['MetricsSetupError', ErrorCode.MetricsSetup, new MetricsSetupError('IMAGEBATCH_METRICS_ADDRESS', 'in use')],
  ['SimulatorConfigError', ErrorCode.SimulatorConfigInvalid, new SimulatorConfigError(['models: empty'])],
  ['ClientGoneError', ErrorCode.ClientGone, new ClientGoneError('gone')],
  ['RequestShapeError', ErrorCode.RequestShapeInvalid, new RequestShapeError('clash')],
  [
    'DownloadAddressRefusedError',
    ErrorCode.DownloadAddressRefused,
    new DownloadAddressRefusedError('images.test', '10.0.0.1', 'private'),
  ],
  ['RequestTimeoutError', ErrorCode.RequestTimeout, new RequestTimeoutError(1500)],
  ['ApiKeyError', ErrorCode.ApiKeyInvalid, new ApiKeyError('IMAGEGEN_API_KEY is not set')],
  ['BatchFileError', ErrorCode.BatchFileUnreadable, new BatchFileError(BatchFileErrorReason.Unreadable, 'cannot read')],
  ['BatchFileError', ErrorCode.BatchFileUnreadable, new BatchFileError(BatchFileErrorReason.Changed, 'changed')],
  [
    'PayloadCodecError',
    ErrorCode.PayloadKeyUnknown,
    new PayloadCodecError(PayloadCodecErrorCode.UnknownKey, 'k', 'k1'),
  ],
  ['PayloadCodecError', ErrorCode.PayloadTampered, new PayloadCodecError(PayloadCodecErrorCode.Tampered, 'tampered')],
  ['PayloadCodecError', ErrorCode.PayloadMalformed, new PayloadCodecError(PayloadCodecErrorCode.Malformed, 'bad')],
];

describe('the error family', () => {
  it.each(cases)('%s is an ImagebatchError with code %s', (name, code, error) => {
    expect(error).toBeInstanceOf(ImagebatchError);
    expect(error).toBeInstanceOf(Error);
    expect(error.code).toBe(code);
    // Temporal takes an activity failure's type from the error's name, and logs print it.
    expect(error.name).toBe(name);
    expect(hasErrorCode(error, code)).toBe(true);
  });

  it('keeps the messages callers print', () => {
    expect(new ConfigError('IMAGEGEN_BASE_URL', 'must be a URL').message).toBe('IMAGEGEN_BASE_URL: must be a URL');
    expect(new RequestTimeoutError(1500).message).toBe(
      'no complete response within 1500 ms (IMAGEGEN_REQUEST_TIMEOUT_MS)',
    );
    expect(new SimulatorConfigError(['a: x', 'b: y']).message).toBe('invalid simulator config:\n  a: x\n  b: y');
  });

  it('hasErrorCode is false for another code and for errors that are not ours', () => {
    expect(hasErrorCode(new ApiKeyError('x'), ErrorCode.ConfigInvalid)).toBe(false);
    const lookalike = Object.assign(new Error('x'), { code: ErrorCode.ConfigInvalid });
    expect(hasErrorCode(lookalike, ErrorCode.ConfigInvalid)).toBe(false);
    expect(hasErrorCode(undefined, ErrorCode.ConfigInvalid)).toBe(false);
  });

  it('gives every code one meaning: no two names share a value', () => {
    const values = Object.values(ErrorCode);
    expect(new Set(values).size).toBe(values.length);
  });
});
