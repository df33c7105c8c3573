import { type AccountConfig } from './config';
import { CreationOutcome, type ChargeBook } from './charges';
import { toMicros, toUsd } from './money';

/** Why a charge cannot be made: the details of a 402. */
export type ChargeRefusal =
  | { reason: 'wallet'; requiredUsd: number; balanceUsd: number }
  | { reason: 'monthly_budget'; requiredUsd: number; capUsd: number };

interface BudgetUse {
  month: string;
  micros: number;
}

/** Money state as persistence saves it (micro-USD, so that nothing is rounded twice). */
export interface BillingState {
  wallets: { accountId: string; micros: number }[];
  /** Budgets set at run time (`setMonthlyBudget`); the others come from the config. */
  budgets: { keyId: string; usd: number | null }[];
  spent: { keyId: string; month: string; micros: number }[];
  /** Charges of creations still in flight: what a later refund gives back, and to which month. */
  pendingCharges: { creationId: string; keyId: string; month: string; micros: number }[];
}

/** Calendar month (UTC) of a clock time: the period of the monthly budget. */
function monthOf(ms: number): string {
  return new Date(ms).toISOString().slice(0, 7);
}

/**
 * Wallets per account and monthly spending per key. Every movement of money goes through here so that the
 * charge book and the balances cannot disagree.
 */
export class Billing {
  private readonly wallets = new Map<string, number>();
  private readonly budgets = new Map<string, number | null>();
  private readonly spent = new Map<string, BudgetUse>();
  /** Month a creation's charge was counted in, so a refund lowers that month only. */
  private readonly chargeMonth = new Map<string, { keyId: string; month: string; micros: number }>();
  private readonly budgetChanges = new Map<string, number | null>();

  constructor(
    accounts: readonly AccountConfig[],
    readonly charges: ChargeBook,
  ) {
    for (const account of accounts) {
      this.wallets.set(account.id, toMicros(account.walletUsd));
      for (const key of account.keys) this.budgets.set(key.id, key.monthlyBudgetUsd);
    }
  }

  balanceUsd(accountId: string): number {
    return toUsd(this.wallets.get(accountId) ?? 0);
  }

  setWallet(accountId: string, usd: number): void {
    this.wallets.set(accountId, toMicros(usd));
  }

  setMonthlyBudget(keyId: string, usd: number | null): void {
    this.budgets.set(keyId, usd);
    this.budgetChanges.set(keyId, usd);
  }

  saveState(): BillingState {
    return {
      wallets: [...this.wallets].map(([accountId, micros]) => ({ accountId, micros })),
      budgets: [...this.budgetChanges].map(([keyId, usd]) => ({ keyId, usd })),
      spent: [...this.spent].map(([keyId, use]) => ({ keyId, ...use })),
      pendingCharges: [...this.chargeMonth].map(([creationId, charge]) => ({ creationId, ...charge })),
    };
  }

  /** Saved wallets replace the config's opening balances; run-time budgets replace the config's. */
  restoreState(state: BillingState): void {
    for (const w of state.wallets) if (this.wallets.has(w.accountId)) this.wallets.set(w.accountId, w.micros);
    for (const b of state.budgets) this.setMonthlyBudget(b.keyId, b.usd);
    for (const s of state.spent) this.spent.set(s.keyId, { month: s.month, micros: s.micros });
    for (const c of state.pendingCharges) {
      this.chargeMonth.set(c.creationId, { keyId: c.keyId, month: c.month, micros: c.micros });
    }
  }

  /** Spending of the key in the month of `now`, net of refunds. */
  spentThisMonthUsd(keyId: string, now: number): number {
    const use = this.spent.get(keyId);
    return use && use.month === monthOf(now) ? toUsd(use.micros) : 0;
  }

  /** The 402 reason if the wallet or the key's monthly budget cannot cover `micros`. */
  check(accountId: string, keyId: string, micros: number, now: number): ChargeRefusal | undefined {
    const balance = this.wallets.get(accountId) ?? 0;
    if (balance < micros) return { reason: 'wallet', requiredUsd: toUsd(micros), balanceUsd: toUsd(balance) };
    const cap = this.budgets.get(keyId);
    if (cap !== null && cap !== undefined) {
      const use = this.spent.get(keyId);
      const used = use && use.month === monthOf(now) ? use.micros : 0;
      if (used + micros > toMicros(cap)) return { reason: 'monthly_budget', requiredUsd: toUsd(micros), capUsd: cap };
    }
    return undefined;
  }

  charge(input: {
    accountId: string;
    keyId: string;
    creationId: string;
    idempotencyKey: string | null;
    micros: number;
    now: number;
  }): void {
    this.wallets.set(input.accountId, (this.wallets.get(input.accountId) ?? 0) - input.micros);
    const month = monthOf(input.now);
    const use = this.spent.get(input.keyId);
    if (use && use.month === month) use.micros += input.micros;
    else this.spent.set(input.keyId, { month, micros: input.micros });
    this.chargeMonth.set(input.creationId, { keyId: input.keyId, month, micros: input.micros });
    this.charges.charge({ ...input, at: input.now });
  }

  /** Refunds a creation's charge in full (once) and records its outcome. */
  refund(accountId: string, creationId: string, at: number, reason: string, outcome: CreationOutcome): void {
    const charged = this.chargeMonth.get(creationId);
    if (charged) {
      this.chargeMonth.delete(creationId);
      this.wallets.set(accountId, (this.wallets.get(accountId) ?? 0) + charged.micros);
      const use = this.spent.get(charged.keyId);
      if (use && use.month === charged.month) use.micros -= charged.micros;
      this.charges.refund(creationId, at, reason);
    }
    this.charges.register(creationId, outcome);
  }

  /** A creation finished well: its charge stands. */
  settleSuccess(creationId: string): void {
    this.chargeMonth.delete(creationId);
    this.charges.register(creationId, CreationOutcome.Succeeded);
  }
}
