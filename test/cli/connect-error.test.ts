import { Connection, ServiceError } from '@temporalio/client';
import { describe, expect, it } from 'vitest';
import { AddressSource, connectError, TemporalUnreachableError } from '../../src/cli/connect-error';
import { ErrorCode } from '../../src/model/errors';

/** What `Connection.connect` really throws for `options`. */
async function connectFailure(options: Parameters<typeof Connection.connect>[0]): Promise<unknown> {
  try {
    const connection = await Connection.connect(options);
    await connection.close();
  } catch (err) {
    return err;
  }
  throw new Error('connected');
}

/** A gRPC error as the SDK's ServiceError carries it. */
const grpcError = (code: number, name: string, details: string) =>
  Object.assign(new Error(`${code} ${name}: ${details}`), { code, details });

describe('connectError: one line naming the address, where it came from, why, and what to do', () => {
  it('nothing answers at TEMPORAL_ADDRESS (the SDK says only "Failed to connect before the deadline")', async () => {
    const error = await connectFailure({ address: '127.0.0.1:1', connectTimeout: 200 });
    expect((error as Error).message).toBe('Failed to connect before the deadline');
    const err = connectError({ error, address: '127.0.0.1:1', source: AddressSource.Env, timeoutMs: 10_000 });
    expect(err).toBeInstanceOf(TemporalUnreachableError);
    expect(err.code).toBe(ErrorCode.TemporalUnreachable);
    expect(err.cause).toBe(error);
    expect(err.message).toBe(
      'cannot reach Temporal at 127.0.0.1:1 (from TEMPORAL_ADDRESS): no answer within 10 s; start Temporal there, ' +
        'or correct TEMPORAL_ADDRESS (docs/settings.md), or unset it to run on this machine ' +
        '(imagebatch run starts a local server)',
    );
    expect(err.message).not.toContain('\n');
  });

  it('a profile: names it, and says to correct it or choose another', () => {
    const source = 'profile default in /home/u/.config/temporalio/temporal.toml';
    const err = connectError({ error: new Error('Failed to connect before the deadline'), address: 'h:7233', source });
    expect(err.message).toMatch(
      /^cannot reach Temporal at h:7233 \(from profile default in \/home\/u\/\.config\/temporalio\/temporal\.toml\): no answer; /,
    );
    expect(err.message).toContain('correct the profile, or choose another with TEMPORAL_PROFILE (docs/settings.md)');
    expect(err.message).not.toContain('unset');
  });

  it('the local server: says so, and where its log is', () => {
    const err = connectError({
      error: new Error('Failed to connect before the deadline'),
      address: '127.0.0.1:7234',
      source: AddressSource.Local,
    });
    expect(err.message).toMatch(/^cannot reach Temporal at 127\.0\.0\.1:7234 \(the local server\): no answer; /);
    expect(err.message).toContain('log is in the imagebatch home');
  });

  it('credentials refused (the SDK wraps the gRPC error): says so, and points at the key and TLS settings', () => {
    const error = new ServiceError('Failed to connect to Temporal server', {
      cause: grpcError(16, 'UNAUTHENTICATED', 'Request unauthorized.'),
    });
    const err = connectError({ error, address: 'ns.tmprl.cloud:7233', source: AddressSource.Env });
    expect(err.message).toBe(
      'cannot reach Temporal at ns.tmprl.cloud:7233 (from TEMPORAL_ADDRESS): refused (UNAUTHENTICATED: Request ' +
        'unauthorized.); check TEMPORAL_API_KEY or the TLS client certificate (docs/deploying.md#temporal-cloud-and-tls)',
    );
    const denied = new ServiceError('Failed to connect to Temporal server', {
      cause: grpcError(7, 'PERMISSION_DENIED', 'no access'),
    });
    expect(connectError({ error: denied, address: 'a:1', source: AddressSource.Env }).message).toContain(
      'refused (PERMISSION_DENIED: no access)',
    );
  });

  it('a TLS setting that cannot be used (a certificate that is not PEM): says TLS, and where its settings are', async () => {
    const error = await connectFailure({
      address: '127.0.0.1:1',
      tls: { clientCertPair: { crt: Buffer.from('not a certificate'), key: Buffer.from('not a key') } },
      connectTimeout: 200,
    });
    const err = connectError({ error, address: '127.0.0.1:1', source: AddressSource.Env });
    expect(err.message).toMatch(/\(from TEMPORAL_ADDRESS\): TLS: .*PEM/);
    expect(err.message).toContain('check the TLS settings');
  });

  it('network errors in words; any other error by its first line, shortened', () => {
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:7233'), { code: 'ECONNREFUSED' });
    expect(connectError({ error: refused, address: '127.0.0.1:7233', source: AddressSource.Env }).message).toContain(
      '(from TEMPORAL_ADDRESS): connection refused (nothing listens there); start Temporal there',
    );
    const unknownHost = new Error('wrapped', { cause: Object.assign(new Error('getaddrinfo'), { code: 'ENOTFOUND' }) });
    expect(connectError({ error: unknownHost, address: 'nohost:7233', source: AddressSource.Env }).message).toContain(
      ': unknown host; ',
    );
    const unavailable = new ServiceError('Failed to connect to Temporal server', {
      cause: grpcError(14, 'UNAVAILABLE', 'upstream connect error'),
    });
    expect(connectError({ error: unavailable, address: 'a:1', source: AddressSource.Env }).message).toContain(
      '(from TEMPORAL_ADDRESS): upstream connect error; start Temporal there',
    );
    const long = connectError({ error: new Error(`${'x'.repeat(300)}\nsecond line`), address: 'a:1', source: 'p' });
    expect(long.message).not.toContain('second line');
    expect(long.message).toContain(`${'x'.repeat(159)}…;`);
    expect(connectError({ error: 'odd', address: 'a:1', source: 'p' }).message).toContain('(from p): odd; ');
  });
});
