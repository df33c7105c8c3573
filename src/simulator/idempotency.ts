import { type ApiResponse } from './responses';

interface Stored {
  fingerprint: string;
  response: ApiResponse;
  storedAt: number;
}

/** One stored response as persistence saves it. */
export interface StoredResponse extends Stored {
  /** Account id and Idempotency-Key, joined by a newline. */
  scope: string;
}

export type Lookup =
  | { kind: 'miss' }
  | { kind: 'replay'; response: ApiResponse }
  | { kind: 'mismatch' }
  | { kind: 'pending'; done: Promise<void> };

/**
 * Responses stored per (account, Idempotency-Key), with the fingerprint of the body they answered.
 * A request whose key is being handled right now finds it `pending` and waits, then looks again: two
 * concurrent requests with one key are served once. Entries expire after `ttlMs` and the oldest go
 * beyond `maxEntries`, so memory stays bounded.
 */
export class IdempotencyStore {
  private readonly entries = new Map<string, Stored>();
  private readonly inProgress = new Map<string, { done: Promise<void>; release: () => void }>();

  constructor(
    private readonly ttlMs: number,
    private readonly maxEntries: number,
  ) {}

  get size(): number {
    return this.entries.size;
  }

  lookup(scope: string, fingerprint: string, now: number): Lookup {
    const pending = this.inProgress.get(scope);
    if (pending) return { kind: 'pending', done: pending.done };
    const stored = this.entries.get(scope);
    if (!stored) return { kind: 'miss' };
    if (stored.storedAt + this.ttlMs <= now) {
      this.entries.delete(scope);
      return { kind: 'miss' };
    }
    if (stored.fingerprint !== fingerprint) return { kind: 'mismatch' };
    return { kind: 'replay', response: stored.response };
  }

  /** Marks the key as being handled; call the returned function once the response went out. */
  begin(scope: string): () => void {
    let resolve = (): void => {};
    const done = new Promise<void>((r) => (resolve = r));
    const entry = { done, release: resolve };
    this.inProgress.set(scope, entry);
    return () => {
      if (this.inProgress.get(scope) === entry) this.inProgress.delete(scope);
      resolve();
    };
  }

  store(scope: string, fingerprint: string, response: ApiResponse, now: number): void {
    this.entries.delete(scope);
    this.entries.set(scope, { fingerprint, response, storedAt: now });
    this.expire(now);
  }

  /** Stored responses, oldest first (keys being handled right now are not included). */
  list(): StoredResponse[] {
    return [...this.entries].map(([scope, stored]) => ({ scope, ...stored }));
  }

  /** Puts back saved responses (oldest first), then applies expiry and the bound. */
  restore(saved: readonly StoredResponse[], now: number): void {
    for (const { scope, fingerprint, response, storedAt } of saved) {
      this.entries.delete(scope);
      this.entries.set(scope, { fingerprint, response, storedAt });
    }
    this.expire(now);
  }

  /** Drops expired entries (oldest first: insertion order is storage order) and any beyond the cap. */
  expire(now: number): void {
    for (const [scope, stored] of this.entries) {
      if (this.entries.size > this.maxEntries || stored.storedAt + this.ttlMs <= now) this.entries.delete(scope);
      else break;
    }
  }

  /** Releases every waiter (on close). */
  releaseAll(): void {
    for (const entry of this.inProgress.values()) entry.release();
    this.inProgress.clear();
  }
}
