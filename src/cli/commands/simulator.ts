import { readFile } from 'node:fs/promises';
import { startSimulator, type Simulator, type SimulatorConfigInput } from '../../simulator';
import { describeIssues, simulatorConfigSchema, SimulatorConfigError } from '../../simulator/config';
import { z } from 'zod';
import { defineCommand } from '../command';
import { flag, port } from '../options';

/** Options of {@link simulator}. */
export interface SimulatorOptions {
  /**
   * API port on 127.0.0.1; overrides the config file's `port`.
   * @default 0 (the OS picks a free port)
   */
  port?: number;
  /**
   * Image file port on 127.0.0.1; overrides the config file's `filesPort`.
   * @default 0 (the OS picks a free port)
   */
  filesPort?: number;
  /** A JSON file with the simulator's configuration (see src/simulator/config.ts); defaults for all else. */
  configFile?: string;
}

export interface SimulatorStarted {
  /** The running simulator; `close()` stops it. */
  simulator: Simulator;
  baseUrl: string;
  filesUrl: string;
  ledgerUrl: string;
}

/** Reads and validates a config file; errors name the file and each wrong field. */
export async function loadSimulatorConfigFile(file: string): Promise<SimulatorConfigInput> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    throw new Error(`cannot read simulator config ${file}: ${err instanceof Error ? err.message : String(err)}`);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new Error(`simulator config ${file} is not valid JSON: ${err instanceof Error ? err.message : String(err)}`);
  }
  const parsed = simulatorConfigSchema.safeParse(json);
  if (!parsed.success) {
    throw new SimulatorConfigError(describeIssues(parsed.error).map((issue) => `${file}: ${issue}`));
  }
  // Return the input form: startSimulator validates again and hashes plaintext keys.
  return json as SimulatorConfigInput;
}

/** `imagebatch simulator [--port N] [--files-port N] [--config FILE]`: starts the simulator, returns where it is. */
export async function simulator(options: SimulatorOptions = {}): Promise<SimulatorStarted> {
  const config: SimulatorConfigInput = options.configFile ? await loadSimulatorConfigFile(options.configFile) : {};
  const sim = await startSimulator({
    ...config,
    ...(options.port !== undefined ? { port: options.port } : {}),
    ...(options.filesPort !== undefined ? { filesPort: options.filesPort } : {}),
  });
  return {
    simulator: sim,
    baseUrl: sim.baseUrl,
    filesUrl: sim.filesUrl,
    ledgerUrl: `http://127.0.0.1:${sim.port}/_sim/ledger`,
  };
}

/** Resolves once `signal` is aborted (Ctrl-C): a server command runs until then. */
export const aborted = (signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    if (signal.aborted) resolve();
    else signal.addEventListener('abort', () => resolve(), { once: true });
  });

/** `imagebatch simulator`: runs until Ctrl-C. */
export const simulatorCommand = defineCommand({
  name: 'simulator',
  description: 'Run the image-service simulator (a dry-run target; keys from its config, never from arguments)',
  options: [
    { flags: '--port <n>', description: 'API port on 127.0.0.1 (0: any free port)' },
    { flags: '--files-port <n>', description: 'image file port on 127.0.0.1 (0: any free port)' },
    { flags: '--config <file>', description: 'JSON configuration file' },
    { flags: '--json', description: 'print the addresses as JSON' },
  ],
  schema: z.object({ port: port.optional(), filesPort: port.optional(), config: z.string().optional(), json: flag }),
  async run(opts, { stdout, signal }) {
    const started = await simulator({
      ...(opts.port === undefined ? {} : { port: opts.port }),
      ...(opts.filesPort === undefined ? {} : { filesPort: opts.filesPort }),
      ...(opts.config === undefined ? {} : { configFile: opts.config }),
    });
    const { baseUrl, filesUrl, ledgerUrl } = started;
    stdout(
      opts.json
        ? `${JSON.stringify({ baseUrl, filesUrl, ledgerUrl })}\n`
        : `simulator API: ${baseUrl}\nimage files:   ${filesUrl}\nledger:        ${ledgerUrl}\n(Ctrl-C stops it)\n`,
    );
    await aborted(signal);
    await started.simulator.close();
  },
});
