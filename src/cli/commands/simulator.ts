import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { plainHttpProblem } from '../../config/insecure-http';
import { DEMO_API_KEY, startSimulator, type Simulator, type SimulatorConfigInput } from '../../simulator';
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
  /**
   * The key it accepts when it runs with its default accounts: the simulator's own demo key (public, not a real
   * one). Absent with accounts from a config file: their keys are the user's, never printed.
   */
  demoKey?: string;
  /** A model its (first) account may use: what a first run names with `--model`. */
  model: string;
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
    ...(config.accounts === undefined ? { demoKey: DEMO_API_KEY } : {}),
    model: config.accounts?.[0]?.models?.[0] ?? config.models?.[0]?.id ?? 'flux-dev',
  };
}

/** What a worker, or a run on this machine, needs to use a running simulator. */
export interface SimulatorUse {
  /** The variables to set; `IMAGEGEN_API_KEY` only when it is the demo key. */
  env: Record<string, string>;
  /** A first run against it. */
  command: string;
  /** The lines to paste in a shell: `export` of each variable (a placeholder for a key of the config), then `command`. */
  lines: string[];
}

/** The example batch file of a checkout of the repository, when the command runs there. */
const EXAMPLE_FILE = 'examples/demo-prompts.csv';

/** How to use a running simulator from this machine: its base URL and key as a worker reads them, and a first run. */
export function simulatorUse(started: Pick<SimulatorStarted, 'baseUrl' | 'demoKey' | 'model'>): SimulatorUse {
  const env: Record<string, string> = { IMAGEGEN_BASE_URL: started.baseUrl };
  // A host that is not loopback (a config's `host`) is reached over plain http only when the worker is told so.
  const plainHttp = plainHttpProblem(started.baseUrl, undefined);
  if (plainHttp) env.IMAGEGEN_ALLOW_INSECURE_HTTP = new URL(started.baseUrl).hostname;
  if (started.demoKey) env.IMAGEGEN_API_KEY = started.demoKey;
  const file = existsSync(EXAMPLE_FILE) ? EXAMPLE_FILE : 'prompts.csv';
  // `npx imagebatch`, as the README runs it from a clone (not on PATH there); local mode follows without --follow.
  const command = `npx imagebatch run ${file} --model ${started.model}`;
  const exports = Object.entries(env).map(([name, value]) => `export ${name}=${value}`);
  if (!started.demoKey) exports.push('export IMAGEGEN_API_KEY=<a key of your config>');
  return { env, command, lines: [...exports, command] };
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
  summary: 'Run the image-service simulator (dry runs)',
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
    const { baseUrl, filesUrl, ledgerUrl, demoKey } = started;
    const use = simulatorUse(started);
    stdout(
      opts.json
        ? `${JSON.stringify({ baseUrl, filesUrl, ledgerUrl, ...(demoKey ? { apiKey: demoKey } : {}), ...use })}\n`
        : [
            `simulator API: ${baseUrl}`,
            `image files:   ${filesUrl}`,
            `ledger:        ${ledgerUrl}`,
            demoKey
              ? `key:           ${demoKey}  (the simulator's own demo key, public; not a real one)`
              : 'keys:          those of your config (not printed)',
            'To run a batch against it from this machine (in another terminal):',
            ...use.lines.map((line) => `  ${line}`),
            '(a worker you start yourself, npx imagebatch worker, needs the same variables)',
            '(Ctrl-C stops it)',
            '',
          ].join('\n'),
    );
    await aborted(signal);
    await started.simulator.close();
  },
});
