import { Client, Connection } from '@temporalio/client';
import { connectionOptions, loadTemporalConfig, type TemporalConfig } from '../config/temporal-config';

/** A Temporal client from the standard environment variables, and how to close it. */
export async function connectClient(
  env: Readonly<Record<string, string | undefined>>,
): Promise<{ client: Client; config: TemporalConfig; close: () => Promise<void> }> {
  const config = loadTemporalConfig(env);
  const connection = await Connection.connect({ ...connectionOptions(config), connectTimeout: 10_000 });
  return { client: new Client({ connection, namespace: config.namespace }), config, close: () => connection.close() };
}

/** Runs `fn` with a client from the environment, and closes it whatever happens. */
export async function withClient(fn: (client: Client) => Promise<void>): Promise<void> {
  const { client, close } = await connectClient(process.env);
  try {
    await fn(client);
  } finally {
    await close();
  }
}
