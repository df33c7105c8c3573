import { describe, expect, it } from 'vitest';
import { idempotencyKeyFor } from '../../src/model';
import {
  reconcileSpend,
  spendTotalInWords,
  spendViolations,
  type ResultsSpendRecord,
  type SimulatorCreationSpend,
} from './spend-reconciliation';

const BATCH = 'b1';
const key = (row: string, attempt = 1) => idempotencyKeyFor(BATCH, row, attempt);

/** A results.jsonl record with its keys and figures (null: unknown). */
function record(
  row: string,
  keys: string[],
  charged: number | null,
  refunded: number | null,
  net: number | null,
): ResultsSpendRecord {
  return {
    row_id: row,
    keys: keys.map((k) => ({ idempotency_key: k })),
    charged_usd: charged,
    refunded_usd: refunded,
    net_usd: net,
  };
}

function creation(idempotencyKey: string | null, charged: number, refunded = 0): SimulatorCreationSpend {
  return {
    creationId: `c-${idempotencyKey ?? 'none'}-${charged}-${refunded}`,
    idempotencyKey,
    chargedUsd: charged,
    refundedUsd: refunded,
  };
}

/** Three rows: one succeeded, one failed and refunded, one with a 502 (refunded) then a success. */
const RECORDS = [
  record('r1', [key('r1')], 0.04, 0, 0.04),
  record('r2', [key('r2')], 0.04, 0.04, 0),
  record('r3', [key('r3', 1), key('r3', 2)], 0.08, 0.04, 0.04),
];
const CREATIONS = [
  creation(key('r1'), 0.04),
  creation(key('r2'), 0.04, 0.04),
  creation(key('r3', 1), 0.04, 0.04),
  creation(key('r3', 2), 0.04),
  // Another batch's key and a charge without a key: not this batch's.
  creation(idempotencyKeyFor('other', 'r1', 1), 0.04),
  creation(null, 0.04),
];

describe('reconcileSpend', () => {
  it('finds no difference when results and the ledger agree', () => {
    const r = reconcileSpend(BATCH, RECORDS, CREATIONS);
    expect(r.differences).toEqual([]);
    expect(r.rowsCompared).toBe(3);
    expect(r.unknownRows).toEqual([]);
    expect(r.totalsDiffering).toEqual([]);
    expect(r.resultsKnown).toEqual({ chargedUsd: 0.16, refundedUsd: 0.08, netUsd: 0.08 });
    expect(r.simulatorSameRows).toEqual(r.resultsKnown);
    expect(r.simulatorAllRows).toEqual(r.resultsKnown);
    expect(spendViolations(r)).toEqual([]);
    expect(spendTotalInWords(r)).toBe('results: $0.08; simulator: $0.08');
  });

  it('names the one row off by 0.04', () => {
    const records = [RECORDS[0]!, record('r2', [key('r2')], 0.04, 0, 0.04), RECORDS[2]!];
    const r = reconcileSpend(BATCH, records, CREATIONS);
    expect(r.differences.map((d) => d.rowId)).toEqual(['r2']);
    expect(r.differences[0]!.results).toEqual({ chargedUsd: 0.04, refundedUsd: 0, netUsd: 0.04 });
    expect(r.differences[0]!.simulator).toEqual({ chargedUsd: 0.04, refundedUsd: 0.04, netUsd: 0 });
    expect(r.differences[0]!.reasons).toEqual([
      'refunded: results 0, simulator 0.04',
      'net: results 0.04, simulator 0',
    ]);
    expect(r.totalsDiffering).toEqual(['refundedUsd', 'netUsd']);
    const violations = spendViolations(r);
    expect(violations).toHaveLength(2);
    expect(violations[0]).toContain('1 rows differ');
    expect(violations[0]).toContain('r2: results $0.04 / $0.00 / $0.04, simulator $0.04 / $0.04 / $0.00');
  });

  it('tolerates a millionth of a dollar, not more', () => {
    const r1 = [creation(key('r1'), 0.04)];
    const within = reconcileSpend(BATCH, [record('r1', [key('r1')], 0.040001, 0, 0.040001)], r1);
    expect(within.differences).toEqual([]);
    const beyond = reconcileSpend(BATCH, [record('r1', [key('r1')], 0.040002, 0, 0.040002)], r1);
    expect(beyond.differences.map((d) => d.rowId)).toEqual(['r1']);
  });

  it('counts a row with a null figure as unknown spend, not a difference', () => {
    const records = [RECORDS[0]!, RECORDS[1]!, record('r3', [key('r3', 1), key('r3', 2)], null, 0.04, null)];
    const r = reconcileSpend(BATCH, records, CREATIONS);
    expect(r.differences).toEqual([]);
    expect(r.rowsCompared).toBe(2);
    expect(r.unknownRows).toEqual([
      {
        rowId: 'r3',
        results: { chargedUsd: null, refundedUsd: 0.04, netUsd: null },
        simulator: { chargedUsd: 0.08, refundedUsd: 0.04, netUsd: 0.04 },
      },
    ]);
    expect(r.unknownSimulator.netUsd).toBe(0.04);
    expect(r.resultsKnown.netUsd).toBe(0.04);
    expect(r.simulatorSameRows.netUsd).toBe(0.04);
    expect(r.simulatorAllRows.netUsd).toBe(0.08);
    expect(spendViolations(r)).toEqual([]);
    expect(spendTotalInWords(r)).toBe('results: at least $0.04 plus 1 row of unknown spend; simulator: $0.08');
  });

  it('takes a key the simulator charged that results do not list as a difference', () => {
    // r1's record lists only its first key; the simulator also charged (and refunded) a second one.
    const creations = [...CREATIONS, creation(key('r1', 2), 0.04, 0.04)];
    const r = reconcileSpend(BATCH, RECORDS, creations);
    expect(r.differences.map((d) => d.rowId)).toEqual(['r1']);
    expect(r.differences[0]!.reasons).toEqual([
      `key ${key('r1', 2)} charged 0.04 by the simulator, not in results`,
      'charged: results 0.04, simulator 0.08',
      'refunded: results 0, simulator 0.04',
    ]);
    // Even in a row of unknown spend.
    const ofR1 = creations.filter((c) => c.idempotencyKey?.startsWith(`ib/${BATCH}/r1/`));
    const unknown = reconcileSpend(BATCH, [record('r1', [key('r1')], null, null, null)], ofR1);
    expect(unknown.unknownRows.map((u) => u.rowId)).toEqual(['r1']);
    expect(unknown.differences.map((d) => d.rowId)).toEqual(['r1']);
  });

  it('takes a row the simulator charged that results lack, and a malformed figure, as differences', () => {
    const records = [RECORDS[0]!, { ...RECORDS[1]!, net_usd: '0' }];
    const r = reconcileSpend(BATCH, records, CREATIONS);
    expect(r.differences.map((d) => [d.rowId, d.reasons])).toEqual([
      ['r2', ['net_usd is "0"']],
      ['r3', [`no record in results; the simulator saw ${key('r3', 1)}, ${key('r3', 2)}`]],
    ]);
    expect(r.rowsCompared).toBe(3);
    expect(r.simulatorAllRows.netUsd).toBe(0.08);
  });
});

describe('reconcileSpend: charges the client never saw answered', () => {
  it('a 502 lost on the way (charged and refunded in full, then the same key sent again) is counted apart, not a difference', () => {
    const batchId = 'b';
    const key = idempotencyKeyFor(batchId, 'r1', 1);
    const r = reconcileSpend(
      batchId,
      [
        {
          row_id: 'r1',
          keys: [{ idempotency_key: key, outcome: 'succeeded' }],
          charged_usd: 0.02,
          refunded_usd: 0,
          net_usd: 0.02,
        },
      ],
      [
        { creationId: 'c0', idempotencyKey: key, chargedUsd: 0.02, refundedUsd: 0.02 },
        { creationId: 'c1', idempotencyKey: key, chargedUsd: 0.02, refundedUsd: 0 },
      ],
    );
    expect(r.differences).toEqual([]);
    expect(r.unseenRefunded).toEqual({ charges: 1, usd: 0.02 });
  });

  it('a refund the results show for the key (outcome refunded) is matched, not counted as unseen', () => {
    const batchId = 'b';
    const key = idempotencyKeyFor(batchId, 'r1', 1);
    const r = reconcileSpend(
      batchId,
      [
        {
          row_id: 'r1',
          keys: [{ idempotency_key: key, outcome: 'refunded' }],
          charged_usd: 0.02,
          refunded_usd: 0.02,
          net_usd: 0,
        },
      ],
      [{ creationId: 'c0', idempotencyKey: key, chargedUsd: 0.02, refundedUsd: 0.02 }],
    );
    expect(r.differences).toEqual([]);
    expect(r.unseenRefunded).toEqual({ charges: 0, usd: 0 });
  });
});
