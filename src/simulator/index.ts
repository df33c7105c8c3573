/** The image-service simulator: a real HTTP service for tests, the demo and benchmarks. */
export { startSimulator, type Simulator, type FaultInput } from './server';
export {
  DEMO_API_KEY,
  DEMO_ACCOUNT_ID,
  DEMO_KEY_ID,
  GenerationShape,
  IdempotencyVariant,
  SimulatorConfigError,
  hashApiKey,
  resolveConfig,
  simulatorConfigSchema,
  type SimulatorConfig,
  type SimulatorConfigInput,
} from './config';
export { ManualClock, systemClock, type Clock } from './clock';
export { FaultKind, type Fault, type FaultSettings, type ScriptRule } from './faults';
export { type ControlCommand, type LimitsPatch } from './control';
export {
  CreationOutcome,
  ChargeKind,
  ChargeBook,
  type ChargeEntry,
  type ChargedCreation,
  type ChargeSnapshot,
  type ChargeViolations,
  type KeySummary,
  type IdempotencySummary,
} from './charges';
export { type SeenRequest } from './files';
export { STATE_FORMAT, STATE_VERSION, type SimulatorState } from './persistence';
export { encodePng, renderImage } from './png';
export {
  LAGGING_READS_PROFILE,
  PASSING_STATUS_PROFILE,
  POLL_HINT_PROFILE,
  PREDICTION_SERVICE_PROFILE,
  QUEUE_SERVICE_PROFILE,
} from './profiles';
