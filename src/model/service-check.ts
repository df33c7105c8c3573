import type { ModelInfo } from './creation';

/**
 * What `run` asks a worker before a batch starts (the key lives only there): the free checks of the service, one GET
 * of the catalog. Plain JSON: the result of the check's workflow.
 */
export const ServiceProblem = {
  /** No byte of the request left: a connection refused, a failed name lookup, the connect timeout, TLS. */
  Unreachable: 'unreachable',
  /** The service refused the key (401, 403). */
  KeyRefused: 'key_refused',
  /** The worker refused to send: its key is missing or malformed. */
  WorkerConfig: 'worker_config',
} as const;
export type ServiceProblem = (typeof ServiceProblem)[keyof typeof ServiceProblem];

export type ServiceCheck =
  /** Nothing stops a batch. `models` when the catalog was read (a service may have none: that blocks nothing). */
  | { ok: true; models?: ModelInfo[] }
  /** A batch would send nothing that could succeed: `message` says what to fix, naming the setting. */
  | { ok: false; problem: ServiceProblem; message: string };
