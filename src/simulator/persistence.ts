import { mkdir, open, readFile, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { FailureMessage } from '../api/contract';
import { describeIssues, faultSchema, SimulatorConfigError } from './config';
import { type Creation } from './creations';
import { type SimulatorEngine } from './engine';
import { type Fault, type ScriptRule } from './faults';
import { CreationOutcome, ChargeKind } from './charges';

/**
 * The simulator's state in a JSON file, so that a stopped simulator (the demo after Ctrl-C) starts again with
 * its creations, stored idempotent responses, money and charge book, and consumed fault scripts. Creations keep
 * their absolute times, so one that was running finishes on schedule relative to the clock. Rate-limit
 * buckets and settings changed at run time (faults, limits, naming) are not saved: the config gives them.
 * Files are written whole to a temporary file that is then renamed over the old one, so a crash mid-write
 * leaves the previous state intact.
 */

export const STATE_FORMAT = 'imagebatch-simulator-state';
/** Bumped on every incompatible change of the layout below; a file of another version is refused. */
export const STATE_VERSION = 1;

/** Periodic saves: at most this often, and only when something changed. */
const SAVE_INTERVAL_MS = 2000;
/** Periodic saves may take at most 1/this of the time (large states are saved less often). */
const SAVE_BUDGET_FACTOR = 50;

const int = z.number().int();
const nonNegative = z.number().int().nonnegative();
const micros = z.number().int();
const uint32 = z
  .number()
  .int()
  .min(0)
  .max(2 ** 32 - 1);
const failureMessages = Object.values(FailureMessage) as [FailureMessage, ...FailureMessage[]];

const creationSchema = z.strictObject({
  id: z.string().min(1),
  accountId: z.string().min(1),
  keyId: z.string().min(1),
  idempotencyKey: z.string().nullable(),
  model: z.string().min(1),
  prompt: z.string(),
  negativePrompt: z.string().optional(),
  width: nonNegative,
  height: nonNegative,
  numImages: nonNegative,
  seed: z.number().int(),
  costMicros: micros,
  acceptedAt: int,
  runningAt: int,
  finishedAt: int,
  error: z.enum(failureMessages).optional(),
  settled: z.boolean(),
  lastPollAt: int.optional(),
});

const scriptPositionSchema = z.strictObject({
  match: z.string().min(1),
  faults: z.array(faultSchema),
  consumed: nonNegative,
});

const stateSchema = z.strictObject({
  format: z.literal(STATE_FORMAT),
  version: z.literal(STATE_VERSION),
  /** Clock time of the save (informative). */
  savedAt: int,
  /** Position of the stream creation ids come from. */
  random: uint32,
  faults: z.strictObject({
    random: uint32,
    /** The config's scripts when the file was written: consumed positions only carry over to the same rules. */
    fromConfig: z.array(z.strictObject({ match: z.string().min(1), faults: z.array(faultSchema) })),
    scripts: z.array(scriptPositionSchema),
  }),
  keys: z.strictObject({
    addedKeys: z.array(
      z.strictObject({
        accountId: z.string().min(1),
        keyId: z.string().min(1),
        sha256: z.string().regex(/^[0-9a-f]{64}$/),
      }),
    ),
    revokedKeys: z.array(z.string().min(1)),
    disabledAccounts: z.array(z.strictObject({ accountId: z.string().min(1), disabled: z.boolean() })),
  }),
  billing: z.strictObject({
    wallets: z.array(z.strictObject({ accountId: z.string().min(1), micros })),
    budgets: z.array(z.strictObject({ keyId: z.string().min(1), usd: z.number().finite().nonnegative().nullable() })),
    spent: z.array(z.strictObject({ keyId: z.string().min(1), month: z.string().regex(/^\d{4}-\d{2}$/), micros })),
    pendingCharges: z.array(
      z.strictObject({
        creationId: z.string().min(1),
        keyId: z.string().min(1),
        month: z.string().regex(/^\d{4}-\d{2}$/),
        micros,
      }),
    ),
  }),
  /** The charge book (the key keeps its first name: files of this version hold it). */
  ledger: z.strictObject({
    seq: nonNegative,
    entries: z.array(
      z.strictObject({
        seq: nonNegative,
        kind: z.enum([ChargeKind.Charge, ChargeKind.Refund]),
        accountId: z.string().min(1),
        keyId: z.string().min(1),
        creationId: z.string().min(1),
        idempotencyKey: z.string().nullable(),
        amountUsd: z.number().finite(),
        at: int,
        reason: z.string(),
      }),
    ),
    rows: z.array(
      z.strictObject({
        creationId: z.string().min(1),
        accountId: z.string().min(1),
        keyId: z.string().min(1),
        idempotencyKey: z.string().nullable(),
        outcome: z.enum(Object.values(CreationOutcome) as [CreationOutcome, ...CreationOutcome[]]),
        registered: z.boolean(),
        priceMicros: micros,
        chargedMicros: micros,
        refundedMicros: micros,
      }),
    ),
  }),
  /** Oldest first. */
  creations: z.array(creationSchema),
  /** Stored responses, oldest first. */
  idempotency: z.array(
    z.strictObject({
      scope: z.string().min(1),
      fingerprint: z.string(),
      storedAt: int,
      response: z.strictObject({
        status: z.number().int().min(100).max(599),
        body: z.unknown(),
        headers: z.record(z.string(), z.string()).optional(),
      }),
    }),
  ),
});

export type SimulatorState = z.output<typeof stateSchema>;

/** The engine's state as the file holds it. Settles due creations first. */
export function captureState(engine: SimulatorEngine): SimulatorState {
  engine.settle();
  const faults = engine.faults.saveState();
  return {
    format: STATE_FORMAT,
    version: STATE_VERSION,
    savedAt: engine.now(),
    random: engine.randomState(),
    faults: {
      random: faults.random,
      fromConfig: engine.config.scripts.map((rule) => ({ match: rule.match, faults: rule.faults.map(plainFault) })),
      scripts: faults.scripts.map((rule) => ({ ...rule, faults: rule.faults.map(plainFault) })),
    },
    keys: engine.keys.runtimeChanges(),
    billing: engine.billing.saveState(),
    ledger: engine.charges.saveState(),
    creations: engine.creations.list().map(savedCreation),
    idempotency: engine.idempotency.list(),
  };
}

/** Loads saved state into a fresh engine (built from the config, nothing served yet). */
export function applyState(engine: SimulatorEngine, state: SimulatorState): void {
  engine.keys.replayChanges(state.keys);
  engine.billing.restoreState(state.billing);
  engine.charges.restoreState(state.ledger);
  for (const saved of state.creations) engine.creations.restore(restoredCreation(saved));
  engine.idempotency.restore(state.idempotency, engine.now());
  engine.faults.restoreState({
    scripts: scriptsToRestore(engine.config.scripts, state.faults),
    random: state.faults.random,
  });
  engine.restoreRandom(state.random);
  engine.settle();
}

/**
 * The same config scripts as at the save: the saved rules as they stood (run-time `scriptFor` included).
 * Changed config scripts: the config's rules, each keeping its position if the file has the identical rule.
 */
function scriptsToRestore(config: readonly ScriptRule[], saved: SimulatorState['faults']) {
  const sameRules = (a: readonly ScriptRule[], b: readonly ScriptRule[]) =>
    JSON.stringify(a.map(plainRule)) === JSON.stringify(b.map(plainRule));
  if (sameRules(config, saved.fromConfig)) return saved.scripts;
  return config.map((rule) => {
    const same = saved.scripts.find((s) => sameRules([s], [rule]));
    return { match: rule.match, faults: rule.faults, consumed: same?.consumed ?? 0 };
  });
}

function plainFault(fault: Fault): Fault {
  return fault.delayMs === undefined ? { kind: fault.kind } : { kind: fault.kind, delayMs: fault.delayMs };
}

function plainRule(rule: ScriptRule): ScriptRule {
  return { match: rule.match, faults: rule.faults.map(plainFault) };
}

function savedCreation(c: Creation): SimulatorState['creations'][number] {
  const { negativePrompt, error, lastPollAt, ...rest } = c;
  return {
    ...rest,
    ...(negativePrompt !== undefined ? { negativePrompt } : {}),
    ...(error !== undefined ? { error } : {}),
    ...(lastPollAt !== undefined ? { lastPollAt } : {}),
  };
}

function restoredCreation(saved: SimulatorState['creations'][number]): Creation {
  return {
    ...saved,
    negativePrompt: saved.negativePrompt,
    error: saved.error,
    lastPollAt: saved.lastPollAt,
  };
}

function fileError(file: string, issues: string[]): SimulatorConfigError {
  return new SimulatorConfigError(
    [...issues, 'fix or delete the file to start with a fresh state'],
    `cannot load the simulator state file ${file}`,
  );
}

/** Reads and validates a state file; undefined when there is none. Any other problem names the file. */
export async function readStateFile(file: string): Promise<SimulatorState | undefined> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw fileError(file, [`cannot be read: ${err instanceof Error ? err.message : String(err)}`]);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw fileError(file, [`is not valid JSON (${err instanceof Error ? err.message : String(err)})`]);
  }
  const head = z.looseObject({ format: z.unknown(), version: z.unknown() }).safeParse(json);
  if (!head.success || head.data.format !== STATE_FORMAT) {
    throw fileError(file, [`is not a simulator state file (format must be "${STATE_FORMAT}")`]);
  }
  if (head.data.version !== STATE_VERSION) {
    throw fileError(file, [
      `has state format version ${JSON.stringify(head.data.version)}; this simulator reads version ${STATE_VERSION}`,
    ]);
  }
  const parsed = stateSchema.safeParse(json);
  if (!parsed.success) throw fileError(file, describeIssues(parsed.error));
  return parsed.data;
}

let tempCounter = 0;

/** Writes `data` to a temporary file beside `file`, flushes it, then renames it over `file`. */
export async function writeStateFile(file: string, data: string): Promise<void> {
  await mkdir(path.dirname(file), { recursive: true });
  const temp = `${file}.${process.pid}.${++tempCounter}.tmp`;
  try {
    const handle = await open(temp, 'w');
    try {
      await handle.writeFile(data, 'utf8');
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(temp, file);
  } catch (err) {
    await rm(temp, { force: true });
    throw err;
  }
}

/**
 * Loads the state file into the engine at start (a bad file: {@link SimulatorConfigError} naming it), then
 * saves on demand, on a timer while the state changes, and once more at the end. Saves run one after another.
 */
export class StatePersistence {
  private chain: Promise<void> = Promise.resolve();
  private savedRevision = -1;
  private timer: NodeJS.Timeout | undefined;
  private notBefore = 0;
  private periodicInFlight = false;

  constructor(
    readonly file: string,
    private readonly engine: SimulatorEngine,
  ) {}

  async load(): Promise<void> {
    const state = await readStateFile(this.file);
    if (!state) return;
    try {
      applyState(this.engine, state);
    } catch (err) {
      throw fileError(this.file, [`does not fit this simulator: ${err instanceof Error ? err.message : String(err)}`]);
    }
    this.savedRevision = this.engine.revision;
  }

  /** Captures the state now and writes it (after any save still being written). */
  save(): Promise<void> {
    const revision = this.engine.revision;
    const data = JSON.stringify(captureState(this.engine));
    const write = this.chain.then(() => writeStateFile(this.file, data));
    this.chain = write.then(
      () => {
        this.savedRevision = Math.max(this.savedRevision, revision);
      },
      () => {},
    );
    return write;
  }

  /** Saves every {@link SAVE_INTERVAL_MS} while something changed; `onError` hears of failed saves. */
  startPeriodic(onError: (err: unknown) => void): void {
    this.timer = setInterval(() => {
      if (this.periodicInFlight || this.engine.revision === this.savedRevision || Date.now() < this.notBefore) return;
      const started = Date.now();
      this.periodicInFlight = true;
      const saving = this.save();
      this.notBefore = Date.now() + (Date.now() - started) * SAVE_BUDGET_FACTOR;
      void saving.then(
        () => (this.periodicInFlight = false),
        (err: unknown) => {
          this.periodicInFlight = false;
          onError(err);
        },
      );
    }, SAVE_INTERVAL_MS).unref();
  }

  stopPeriodic(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }
}
