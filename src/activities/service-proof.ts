import { createHash } from 'node:crypto';
import type { ServiceConfig } from '../api/service-config';
import type { LedgerStore, ServiceProof } from '../ledger';

/**
 * Whether the service was seen understood under this worker's settings, its key honoured: a batch's canary row that
 * ended `succeeded` with its key proven, or doctor's paid test, recorded in the ledger store under the fingerprint of
 * the settings that decide what is sent and how answers are read. A batch whose worker settings were proven skips its
 * canary; any change of such a setting (a field path, a status word, the base URL) needs a new proof.
 */

/**
 * Settings that pace or bound requests without changing what is sent or how an answer is read: left out of the
 * fingerprint. Every other setting is in it, those added later included.
 */
const PACING: ReadonlySet<string> = new Set([
  'minPollIntervalMs',
  'pollPlan',
  'connectTimeoutMs',
  'headersTimeoutMs',
  'bodyTimeoutMs',
  'requestTimeoutMs',
  'maxResponseBytes',
  'maxAmbiguousTries',
  'idempotencyWindowMs',
  'notFoundWindowMs',
  'backoffBaseMs',
  'backoffMaxMs',
  'defaultRetryAfterMs',
  'clientRatePerSec',
  'clientRateBurst',
  'httpConnections',
  // Where a schedule's file may be read: nothing the service sees.
  'scheduleSources',
]);

/**
 * What a proof proves, beside the settings: since the canary and doctor's paid test send their key twice, that the
 * service honours the key where these settings carry it. Proofs recorded before, without it, no longer count.
 */
const PROVES = ['proves', 'the key honoured'] as const;

/**
 * The fingerprint of the settings a proof holds for (SHA-256 of their canonical JSON). Holds no secret. A setting left
 * unset (undefined, such as `idempotencyField` while the key travels in a header) is left out, so that proofs made
 * before it existed still hold; once set, it is in.
 */
export function settingsFingerprint(config: ServiceConfig): string {
  const kept = Object.entries(config)
    .filter(([name, value]) => !PACING.has(name) && value !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return createHash('sha256')
    .update(JSON.stringify([PROVES, ...kept]))
    .digest('hex');
}

export interface ServiceProofResult {
  proven: boolean;
  /** What proved it, when it is. */
  proof?: ServiceProof;
}

export interface RecordServiceProofInput {
  batchId: string;
  rowId: string;
  creationId?: string;
}

interface ProofDeps {
  config: ServiceConfig;
  ledger: LedgerStore;
  now: () => number;
}

/** Records in the store that the service was understood under these settings (a canary's, or doctor's). */
export function serviceProver(deps: ProofDeps): (proof: ServiceProof) => Promise<void> {
  const settings = settingsFingerprint(deps.config);
  return (proof) => deps.ledger.proveService(settings, proof, deps.now());
}

export function createServiceProofActivities(deps: ProofDeps) {
  const settings = settingsFingerprint(deps.config);
  const prove = serviceProver(deps);
  return {
    /** Whether this worker's settings were proven on its store. */
    async checkServiceProof(): Promise<ServiceProofResult> {
      const proof = await deps.ledger.serviceProof(settings);
      return proof ? { proven: true, proof } : { proven: false };
    },

    /** Records that a batch's canary row ended `succeeded` under this worker's settings. */
    async recordServiceProof(input: RecordServiceProofInput): Promise<void> {
      await prove({ by: 'canary', ...input });
    },
  };
}

/** Where the store keeps that a check found the key not honoured under these settings, beside their proof. */
function notHonouredAt(config: ServiceConfig): string {
  return `${settingsFingerprint(config)}:key-not-honoured`;
}

/** Records that a check found the key not honoured under these settings: no check under them is sent again. */
export function recordKeyNotHonoured(
  ledger: LedgerStore,
  config: ServiceConfig,
  found: ServiceProof,
  now: number,
): Promise<void> {
  return ledger.proveService(notHonouredAt(config), found, now);
}

/**
 * The check that found the key not honoured under these settings, unless a proof came after it (doctor's paid test,
 * which always sends its check: the way to prove a service that changed).
 */
export async function keyNotHonoured(ledger: LedgerStore, config: ServiceConfig): Promise<ServiceProof | undefined> {
  const [found, proof] = await Promise.all([
    ledger.serviceProof(notHonouredAt(config)),
    ledger.serviceProof(settingsFingerprint(config)),
  ]);
  if (found === undefined) return undefined;
  return proof?.atMs !== undefined && found.atMs !== undefined && proof.atMs > found.atMs ? undefined : found;
}
