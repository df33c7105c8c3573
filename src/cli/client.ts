import { Client, Connection } from '@temporalio/client';
import { clientDataConverter, payloadCodecFromEnv } from '../codec';
import { connectionOptions, loadTemporalConfig, type TemporalConfig } from '../config/temporal-config';

/** A Temporal client from the standard environment variables, and how to close it. */
export async function connectClient(
  env: Readonly<Record<string, string | undefined>>,
): Promise<{ client: Client; config: TemporalConfig; close: () => Promise<void> }> {
  const config = loadTemporalConfig(env);
  // The same payload keys as the worker's (IMAGEBATCH_PAYLOAD_KEY): inputs, signals, queries and results are encrypted.
  const codec = payloadCodecFromEnv(env);
  const connection = await Connection.connect({ ...connectionOptions(config), connectTimeout: 10_000 });
  const dataConverter = codec ? { dataConverter: clientDataConverter(codec) } : {};
  return {
    client: new Client({ connection, namespace: config.namespace, ...dataConverter }),
    config,
    close: () => connection.close(),
  };
}

/** Runs `fn` with a client from the environment, and closes it whatever happens. */
export async function withClient(
  fn: (client: Client) => Promise<void>,
  env: Readonly<Record<string, string | undefined>> = process.env,
): Promise<void> {
  const { client, close } = await connectClient(env);
  try {
    await fn(client);
  } finally {
    await close();
  }
}
