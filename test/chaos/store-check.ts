import { eachRow, type LedgerKey, type LedgerStore } from '../../src/ledger';
import type { ChargedCreation } from '../../src/simulator';
import { parseIdempotencyKey, roundUsd } from '../../src/model';

/**
 * The ledger store against the simulator's charge book, after the chaos run and its reconcile: every charge the simulator
 * made under a key of the batch is a key the store knows (written ahead of its request), every creation the store
 * knows is one the simulator made under that key, and every charge both know is the same, to the cent.
 */
export interface StoreCheck {
  /** Keys of the batch in the store. */
  storeKeys: number;
  /** Creations the simulator charged under keys of the batch. */
  charges: number;
  /** Charges whose creation the store names under their key. */
  chargesKnown: number;
  /** Charges under a key the store never heard of: a request that left without its `sending` committed. */
  chargesWithoutKey: string[];
  /** Creations the store names that the simulator did not make under that key. */
  unknownCreations: string[];
  /** Keys whose cost in the store differs from the simulator's charge by a cent or more. */
  costsDiffering: string[];
  /** The simulator's charges (USD) over the creations the store knows, and the store's costs for them. */
  chargedKnownUsd: { simulator: number; store: number };
}

export async function checkStore(
  store: LedgerStore,
  batchId: string,
  creations: readonly ChargedCreation[],
): Promise<StoreCheck> {
  const keys = new Map<string, LedgerKey>();
  for await (const row of eachRow(store, batchId)) for (const key of row.keys) keys.set(key.idempotencyKey, key);
  const ours = creations.filter((c) => parseIdempotencyKey(c.idempotencyKey ?? '')?.batchId === batchId);
  const check: StoreCheck = {
    storeKeys: keys.size,
    charges: ours.length,
    chargesKnown: 0,
    chargesWithoutKey: [],
    unknownCreations: [],
    costsDiffering: [],
    chargedKnownUsd: { simulator: 0, store: 0 },
  };
  const byCreation = new Map(ours.map((c) => [c.creationId, c]));
  for (const c of ours) {
    const key = keys.get(c.idempotencyKey!);
    if (!key) check.chargesWithoutKey.push(`${c.idempotencyKey} (${c.creationId})`);
    else if (key.creationId === c.creationId) check.chargesKnown += 1;
  }
  for (const key of keys.values()) {
    if (!key.creationId) continue;
    const c = byCreation.get(key.creationId);
    if (!c || c.idempotencyKey !== key.idempotencyKey) {
      check.unknownCreations.push(`${key.idempotencyKey} -> ${key.creationId}`);
      continue;
    }
    check.chargedKnownUsd.simulator = roundUsd(check.chargedKnownUsd.simulator + c.chargedUsd);
    if (key.costUsd === undefined) continue;
    check.chargedKnownUsd.store = roundUsd(check.chargedKnownUsd.store + key.costUsd);
    if (Math.abs(key.costUsd - c.chargedUsd) >= 0.005) {
      check.costsDiffering.push(`${key.idempotencyKey}: ${key.costUsd} in the store, ${c.chargedUsd} charged`);
    }
  }
  return check;
}

export function storeViolations(check: StoreCheck): string[] {
  const out: string[] = [];
  const some = (list: string[]) =>
    `${list.slice(0, 5).join(' | ')}${list.length > 5 ? ` | and ${list.length - 5} more` : ''}`;
  if (check.chargesWithoutKey.length > 0) {
    out.push(
      `store: ${check.chargesWithoutKey.length} charges under keys it never heard of (${some(check.chargesWithoutKey)})`,
    );
  }
  if (check.unknownCreations.length > 0) {
    out.push(
      `store: ${check.unknownCreations.length} creations the simulator did not make (${some(check.unknownCreations)})`,
    );
  }
  if (check.costsDiffering.length > 0) {
    out.push(`store: ${check.costsDiffering.length} costs differ from the charges (${some(check.costsDiffering)})`);
  }
  return out;
}
