import { StatusNaming, type FailureMessage, type StatusNamingName } from '../api/contract';
import { MinHeap } from './heap';
import { toUsd } from './money';
import { type Random } from './random';

/**
 * Creations as a function of time: at acceptance the simulator fixes when a creation starts running, when
 * it finishes and how (success or one of the four failure strings). Its status is then read off the clock
 * on every request, and `settle()` performs the effects that are due (refunds, freeing quota) whenever
 * anything reads. No timer is needed for correctness, so a test clock can jump ahead.
 */

export const Phase = { Queued: 'queued', Running: 'running', Succeeded: 'succeeded', Failed: 'failed' } as const;
export type Phase = (typeof Phase)[keyof typeof Phase];

export interface Creation {
  readonly id: string;
  readonly accountId: string;
  readonly keyId: string;
  readonly idempotencyKey: string | null;
  readonly model: string;
  readonly prompt: string;
  readonly negativePrompt: string | undefined;
  readonly width: number;
  readonly height: number;
  readonly numImages: number;
  readonly seed: number;
  readonly costMicros: number;
  readonly acceptedAt: number;
  readonly runningAt: number;
  readonly finishedAt: number;
  /** Decided at acceptance, visible from `finishedAt` on. */
  readonly error: FailureMessage | undefined;
  settled: boolean;
  lastPollAt: number | undefined;
}

export function phaseAt(c: Creation, now: number): Phase {
  if (now >= c.finishedAt) return c.error === undefined ? Phase.Succeeded : Phase.Failed;
  return now >= c.runningAt ? Phase.Running : Phase.Queued;
}

/** The public creation record (contract-defaults.md, "The creation record") in the chosen status naming. */
export function creationRecord(c: Creation, now: number, naming: StatusNamingName, filesUrl: string): object {
  const phase = phaseAt(c, now);
  const updatedAt = phase === Phase.Queued ? c.acceptedAt : phase === Phase.Running ? c.runningAt : c.finishedAt;
  return {
    id: c.id,
    status: StatusNaming[naming][phase],
    model: c.model,
    prompt: c.prompt,
    ...(c.negativePrompt !== undefined ? { negative_prompt: c.negativePrompt } : {}),
    width: c.width,
    height: c.height,
    num_images: c.numImages,
    seed: c.seed,
    created_at: new Date(c.acceptedAt).toISOString(),
    updated_at: new Date(updatedAt).toISOString(),
    cost_usd: toUsd(c.costMicros),
    images:
      phase === Phase.Succeeded
        ? Array.from({ length: c.numImages }, (_, n) => ({
            url: `${filesUrl}/files/${c.id}-${n}.png`,
            width: c.width,
            height: c.height,
          }))
        : [],
    ...(phase === Phase.Failed ? { error: c.error } : {}),
  };
}

const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';

/** ULID-like ids (`cr_` + 10 time characters + 16 random ones): sortable, and reproducible from the seed. */
export function newCreationId(now: number, random: Random): string {
  let time = '';
  let t = Math.max(0, Math.floor(now));
  for (let i = 0; i < 10; i++) {
    time = CROCKFORD.charAt(t % 32) + time;
    t = Math.floor(t / 32);
  }
  let tail = '';
  for (let i = 0; i < 16; i++) tail += CROCKFORD.charAt(Math.floor(random() * 32));
  return `cr_${time}${tail}`;
}

export interface CreationStoreOptions {
  /** How long a finished creation stays readable. */
  ttlMs: number;
  /** Finished creations beyond this many are dropped, oldest first. */
  maxEntries: number;
  /** Called once per creation when its finish time has come (refund or confirm the charge). */
  onFinish: (c: Creation) => void;
}

export class CreationStore {
  private readonly all = new Map<string, Creation>();
  private readonly due = new MinHeap<Creation>((c) => c.finishedAt);
  private readonly byAccount = new Map<string, Set<Creation>>();
  private readonly byModel = new Map<string, Set<Creation>>();

  constructor(private readonly options: CreationStoreOptions) {}

  get size(): number {
    return this.all.size;
  }

  get inFlight(): number {
    return this.due.size;
  }

  add(c: Creation): void {
    this.all.set(c.id, c);
    this.due.push(c);
    setOf(this.byAccount, c.accountId).add(c);
    setOf(this.byModel, c.model).add(c);
  }

  get(id: string): Creation | undefined {
    return this.all.get(id);
  }

  /** Every retained creation, oldest first (the order expiry relies on). */
  list(): Creation[] {
    return [...this.all.values()];
  }

  /**
   * Puts back a saved creation: one that was not settled yet is in flight again and finishes (and is refunded
   * or confirmed) at its own `finishedAt`, however long the simulator was stopped. Call in saved order.
   */
  restore(c: Creation): void {
    if (this.all.has(c.id)) return;
    if (c.settled) this.all.set(c.id, c);
    else this.add(c);
  }

  /** Applies every finish that is due by `now`, in finish order, then expires old creations. */
  settle(now: number): void {
    for (let top = this.due.peek(); top !== undefined && top.finishedAt <= now; top = this.due.peek()) {
      this.due.pop();
      top.settled = true;
      this.byAccount.get(top.accountId)?.delete(top);
      this.byModel.get(top.model)?.delete(top);
      this.options.onFinish(top);
    }
    this.expire(now);
  }

  private expire(now: number): void {
    for (const [id, c] of this.all) {
      if (!c.settled) break;
      if (this.all.size > this.options.maxEntries || c.finishedAt + this.options.ttlMs <= now) this.all.delete(id);
      else break;
    }
  }

  inFlightOfAccount(accountId: string): ReadonlySet<Creation> {
    return this.byAccount.get(accountId) ?? new Set();
  }

  inFlightOfModel(model: string): ReadonlySet<Creation> {
    return this.byModel.get(model) ?? new Set();
  }
}

function setOf<K>(map: Map<K, Set<Creation>>, key: K): Set<Creation> {
  let set = map.get(key);
  if (!set) {
    set = new Set();
    map.set(key, set);
  }
  return set;
}

/** The earliest finish among `creations`, for a quota Retry-After. */
export function earliestFinish(creations: Iterable<Creation>): number {
  let min = Infinity;
  for (const c of creations) min = Math.min(min, c.finishedAt);
  return min;
}
