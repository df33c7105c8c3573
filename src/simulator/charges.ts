import { toUsd } from './money';

/**
 * The simulator's charge book (the service's side of the money; imagebatch's own record is the ledger store,
 * src/ledger): every charge and refund the simulator makes, so that tests can prove the client's promises: nothing
 * charged twice for one idempotency key, every failed creation refunded, no charge without a creation.
 * Entries name the key by id, never the key. Bounded: beyond `maxEntries` the oldest entries and creation
 * rows are dropped (the summaries then cover the retained window only).
 */

export const ChargeKind = { Charge: 'charge', Refund: 'refund' } as const;
export type ChargeKind = (typeof ChargeKind)[keyof typeof ChargeKind];

export const CreationOutcome = {
  InFlight: 'in_flight',
  Succeeded: 'succeeded',
  Failed: 'failed',
  /** Charged, then refunded before a 502/503 response: no creation record, the job never ran. */
  Rejected: 'rejected',
} as const;
export type CreationOutcome = (typeof CreationOutcome)[keyof typeof CreationOutcome];

export interface ChargeEntry {
  seq: number;
  kind: ChargeKind;
  accountId: string;
  keyId: string;
  creationId: string;
  idempotencyKey: string | null;
  amountUsd: number;
  /** Clock time, ms since the epoch. */
  at: number;
  reason: string;
}

export interface ChargedCreation {
  creationId: string;
  accountId: string;
  keyId: string;
  idempotencyKey: string | null;
  outcome: CreationOutcome;
  chargedUsd: number;
  refundedUsd: number;
  netUsd: number;
}

export interface KeySummary {
  keyId: string;
  charges: number;
  refunds: number;
  chargedUsd: number;
  refundedUsd: number;
  netUsd: number;
}

export interface IdempotencySummary {
  accountId: string;
  idempotencyKey: string;
  creationIds: string[];
  chargedUsd: number;
  refundedUsd: number;
  netUsd: number;
  /** Creations under this key that are charged net (charge not refunded). More than 1 is a double charge. */
  netCharged: number;
}

/** The charge book as persistence saves it. */
export interface ChargeBookState {
  seq: number;
  entries: ChargeEntry[];
  rows: ChargeRow[];
}

export interface ChargeRow {
  creationId: string;
  accountId: string;
  keyId: string;
  idempotencyKey: string | null;
  outcome: CreationOutcome;
  /** False until the creation (or its rejection) is recorded: a charge without one is a violation. */
  registered: boolean;
  priceMicros: number;
  chargedMicros: number;
  refundedMicros: number;
}

export interface ChargeSnapshot {
  entries: ChargeEntry[];
  byKey: KeySummary[];
  byCreation: ChargedCreation[];
  byIdempotencyKey: IdempotencySummary[];
  violations: ChargeViolations;
}

export interface ChargeViolations {
  chargedTwice: IdempotencySummary[];
  overchargedCreations: ChargedCreation[];
  unrefundedFailures: ChargedCreation[];
  chargesWithoutCreation: ChargedCreation[];
}

export class ChargeBook {
  private readonly entryList: ChargeEntry[] = [];
  private readonly rows = new Map<string, ChargeRow>();
  private seq = 0;

  /** @param beforeRead settles due creations, so that a read reflects refunds that are due by now. */
  constructor(
    private readonly maxEntries: number,
    private readonly beforeRead: () => void = () => {},
  ) {}

  /** Records a charge; the creation must be registered afterwards (see {@link register}). */
  charge(input: {
    accountId: string;
    keyId: string;
    creationId: string;
    idempotencyKey: string | null;
    micros: number;
    at: number;
  }): void {
    const row: ChargeRow = {
      creationId: input.creationId,
      accountId: input.accountId,
      keyId: input.keyId,
      idempotencyKey: input.idempotencyKey,
      outcome: CreationOutcome.InFlight,
      registered: false,
      priceMicros: input.micros,
      chargedMicros: input.micros,
      refundedMicros: 0,
    };
    const existing = this.rows.get(input.creationId);
    if (existing) existing.chargedMicros += input.micros;
    else this.rows.set(input.creationId, row);
    this.push(ChargeKind.Charge, row, input.micros, input.at, 'up-front charge');
  }

  /** Marks the creation as existing (a record or a recorded rejection) with its outcome. */
  register(creationId: string, outcome: CreationOutcome): void {
    const row = this.rows.get(creationId);
    if (!row) return;
    row.registered = true;
    row.outcome = outcome;
  }

  refund(creationId: string, at: number, reason: string): void {
    const row = this.rows.get(creationId);
    if (!row) return;
    const micros = row.chargedMicros - row.refundedMicros;
    if (micros <= 0) return;
    row.refundedMicros += micros;
    this.push(ChargeKind.Refund, row, micros, at, reason);
  }

  saveState(): ChargeBookState {
    return {
      seq: this.seq,
      entries: this.entryList.map((e) => ({ ...e })),
      rows: [...this.rows.values()].map((r) => ({ ...r })),
    };
  }

  /** Replaces the (empty, fresh) charge book's contents with saved ones; the bound applies as on every write. */
  restoreState(state: ChargeBookState): void {
    this.entryList.length = 0;
    this.rows.clear();
    for (const entry of state.entries) this.entryList.push({ ...entry });
    for (const row of state.rows) this.rows.set(row.creationId, { ...row });
    this.seq = Math.max(state.seq, this.entryList.at(-1)?.seq ?? 0);
    this.trim();
  }

  private push(kind: ChargeKind, row: ChargeRow, micros: number, at: number, reason: string): void {
    this.entryList.push({
      seq: ++this.seq,
      kind,
      accountId: row.accountId,
      keyId: row.keyId,
      creationId: row.creationId,
      idempotencyKey: row.idempotencyKey,
      amountUsd: toUsd(micros),
      at,
      reason,
    });
    this.trim();
  }

  private trim(): void {
    if (this.entryList.length > this.maxEntries * 1.1) {
      const dropped = this.entryList.splice(0, this.entryList.length - this.maxEntries);
      for (const entry of dropped) {
        const r = this.rows.get(entry.creationId);
        if (r && r.outcome !== CreationOutcome.InFlight) this.rows.delete(entry.creationId);
      }
    }
  }

  entries(): ChargeEntry[] {
    this.beforeRead();
    return [...this.entryList];
  }

  byCreation(): ChargedCreation[] {
    this.beforeRead();
    return [...this.rows.values()].map(view);
  }

  creation(creationId: string): ChargedCreation | undefined {
    this.beforeRead();
    const row = this.rows.get(creationId);
    return row && view(row);
  }

  byKey(): KeySummary[] {
    this.beforeRead();
    const map = new Map<string, { charges: number; refunds: number; charged: number; refunded: number }>();
    for (const e of this.entryList) {
      const s = map.get(e.keyId) ?? { charges: 0, refunds: 0, charged: 0, refunded: 0 };
      const micros = Math.round(e.amountUsd * 1_000_000);
      if (e.kind === ChargeKind.Charge) {
        s.charges++;
        s.charged += micros;
      } else {
        s.refunds++;
        s.refunded += micros;
      }
      map.set(e.keyId, s);
    }
    return [...map].map(([keyId, s]) => ({
      keyId,
      charges: s.charges,
      refunds: s.refunds,
      chargedUsd: toUsd(s.charged),
      refundedUsd: toUsd(s.refunded),
      netUsd: toUsd(s.charged - s.refunded),
    }));
  }

  byIdempotencyKey(): IdempotencySummary[] {
    this.beforeRead();
    const map = new Map<string, IdempotencySummary & { c: number; r: number }>();
    for (const row of this.rows.values()) {
      if (row.idempotencyKey === null) continue;
      const id = `${row.accountId}\n${row.idempotencyKey}`;
      const s = map.get(id) ?? {
        accountId: row.accountId,
        idempotencyKey: row.idempotencyKey,
        creationIds: [],
        chargedUsd: 0,
        refundedUsd: 0,
        netUsd: 0,
        netCharged: 0,
        c: 0,
        r: 0,
      };
      s.creationIds.push(row.creationId);
      s.c += row.chargedMicros;
      s.r += row.refundedMicros;
      if (row.chargedMicros > row.refundedMicros) s.netCharged++;
      map.set(id, s);
    }
    return [...map.values()].map(({ c, r, ...s }) => ({
      ...s,
      chargedUsd: toUsd(c),
      refundedUsd: toUsd(r),
      netUsd: toUsd(c - r),
    }));
  }

  /** Idempotency keys under which more than one creation stays charged. */
  chargedTwice(): IdempotencySummary[] {
    return this.byIdempotencyKey().filter((s) => s.netCharged > 1);
  }

  /** Failed or rejected creations whose charge is not fully refunded. */
  unrefundedFailures(): ChargedCreation[] {
    return this.byCreation().filter(
      (c) => (c.outcome === CreationOutcome.Failed || c.outcome === CreationOutcome.Rejected) && c.netUsd !== 0,
    );
  }

  /** Charges for which no creation (or recorded rejection) exists. */
  chargesWithoutCreation(): ChargedCreation[] {
    this.beforeRead();
    return [...this.rows.values()].filter((r) => !r.registered).map(view);
  }

  violations(): ChargeViolations {
    return {
      chargedTwice: this.chargedTwice(),
      overchargedCreations: [...this.rows.values()]
        .filter((r) => r.chargedMicros - r.refundedMicros > r.priceMicros)
        .map(view),
      unrefundedFailures: this.unrefundedFailures(),
      chargesWithoutCreation: this.chargesWithoutCreation(),
    };
  }

  /** True when no invariant is broken. */
  isConsistent(): boolean {
    const v = this.violations();
    return (
      v.chargedTwice.length === 0 &&
      v.overchargedCreations.length === 0 &&
      v.unrefundedFailures.length === 0 &&
      v.chargesWithoutCreation.length === 0
    );
  }

  snapshot(): ChargeSnapshot {
    return {
      entries: this.entries(),
      byKey: this.byKey(),
      byCreation: this.byCreation(),
      byIdempotencyKey: this.byIdempotencyKey(),
      violations: this.violations(),
    };
  }
}

function view(row: ChargeRow): ChargedCreation {
  return {
    creationId: row.creationId,
    accountId: row.accountId,
    keyId: row.keyId,
    idempotencyKey: row.idempotencyKey,
    outcome: row.outcome,
    chargedUsd: toUsd(row.chargedMicros),
    refundedUsd: toUsd(row.refundedMicros),
    netUsd: toUsd(row.chargedMicros - row.refundedMicros),
  };
}
