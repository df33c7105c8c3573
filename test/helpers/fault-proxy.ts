import net, { type AddressInfo, type Socket } from 'node:net';
import { z } from 'zod';
import { describeIssues } from '../../src/simulator/config';
import { mulberry32, uniformInt, type SeededRandom } from '../../src/simulator/random';

/**
 * A TCP fault proxy for loopback tests (toxiproxy is not packaged here; test code, not shipped): it forwards bytes
 * between a client and one upstream port and, by seeded probability, breaks exchanges the way networks do. The simulator's own
 * faults happen inside the service; these happen on the wire, to polls and submissions alike, and often after
 * the service has committed (the answer is lost, not the request).
 *
 * It does not parse HTTP. An exchange starts with the first bytes the client sends after the upstream last
 * answered (HTTP/1.1 without pipelining, as undici sends by default), and the answer's first bytes are where a
 * fault of the answer strikes. The status line of each answer is read, for counting only.
 */

/** What the proxy does to one exchange. */
export const ProxyFault = {
  /** The client's socket is destroyed with a TCP RST, before the request is forwarded or when the answer comes. */
  Reset: 'reset',
  /** Forwarding stops for a while (or until the client gives up), before the request or before the answer. */
  Stall: 'stall',
  /** The answer is cut: some of its first bytes are forwarded, then the connection is closed (FIN). */
  Cut: 'cut',
  /** The answer is forwarded late, intact. */
  Latency: 'latency',
} as const;
export type ProxyFault = (typeof ProxyFault)[keyof typeof ProxyFault];

/** Where a reset or a stall strikes. */
export const ProxyPhase = {
  /** Before the request is forwarded: the service never saw it (or, after a stall, sees it late). */
  Request: 'request',
  /** When the answer comes: the service has done its work, the client does not get the answer (in time). */
  Answer: 'answer',
} as const;
export type ProxyPhase = (typeof ProxyPhase)[keyof typeof ProxyPhase];

const DESTRUCTIVE = [ProxyFault.Reset, ProxyFault.Stall, ProxyFault.Cut] as const;

const probability = z.number().min(0).max(1);
const rangeSchema = z
  .strictObject({ minMs: z.number().int().nonnegative(), maxMs: z.number().int().nonnegative() })
  .refine((r) => r.minMs <= r.maxMs, { message: 'minMs must not exceed maxMs' });

const settingsSchema = z.strictObject({
  probabilities: z
    .strictObject({
      reset: probability.default(0),
      stall: probability.default(0),
      cut: probability.default(0),
      latency: probability.default(0),
    })
    .refine((p) => p.reset + p.stall + p.cut <= 1, { message: 'reset + stall + cut must add up to at most 1' })
    .prefault({}),
  stallMs: rangeSchema.nullable().default({ minMs: 1000, maxMs: 5000 }),
  latencyMs: rangeSchema.default({ minMs: 50, maxMs: 500 }),
  answerPhaseShare: probability.default(0.5),
});

/** The proxy's faults; every field may be changed at run time with {@link FaultProxy.setFaults}. */
export interface ProxyFaultSettings {
  /**
   * Chance of each fault per exchange. Reset, stall and cut exclude each other (one roll; their sum is at most
   * 1); latency is rolled separately, for exchanges that drew none of them.
   * @default every chance 0
   */
  probabilities: Record<ProxyFault, number>;
  /**
   * How long a stall holds the bytes, uniform in the range; `null`: until the client gives up.
   * @default { minMs: 1000, maxMs: 5000 }
   */
  stallMs: { minMs: number; maxMs: number } | null;
  /**
   * Delay of a latency fault, uniform in the range.
   * @default { minMs: 50, maxMs: 500 }
   */
  latencyMs: { minMs: number; maxMs: number };
  /**
   * Share of resets and stalls that strike the answer rather than the request.
   * @default 0.5
   */
  answerPhaseShare: number;
}

export type ProxyFaultSettingsInput = z.input<typeof settingsSchema>;

/** Settings the proxy cannot use; `issues` name each field. */
export class FaultProxyConfigError extends Error {
  readonly code = 'FAULT_PROXY_CONFIG_INVALID';
  constructor(readonly issues: readonly string[]) {
    super(`invalid fault proxy settings:\n  ${issues.join('\n  ')}`);
    this.name = 'FaultProxyConfigError';
  }
}

/** Options of {@link startFaultProxy}. */
export interface FaultProxyOptions {
  /** The port bytes are forwarded to. */
  targetPort: number;
  /**
   * The host bytes are forwarded to.
   * @default '127.0.0.1'
   */
  targetHost?: string;
  /**
   * Port to listen on; 0 lets the OS pick.
   * @default 0
   */
  port?: number;
  /**
   * Address to listen on (loopback: the proxy is a test tool).
   * @default '127.0.0.1'
   */
  host?: string;
  /**
   * Seed of the fault rolls: the same seed and the same sequence of exchanges give the same faults.
   * @default 1
   */
  seed?: number;
  /**
   * Faults at start.
   * @default none
   */
  faults?: ProxyFaultSettingsInput;
}

/** What the proxy has seen and done since it started. */
export interface FaultProxyCounts {
  connections: number;
  exchanges: number;
  /** Faults injected, by kind (a fault is counted when it strikes, not when it is drawn). */
  injected: Record<ProxyFault, number>;
  /** Of the resets and stalls, those that struck before the request was forwarded. */
  beforeRequest: { reset: number; stall: number };
  /** Resets that came from upstream (the service reset the connection itself) and were passed on. */
  upstreamResets: number;
  /** Answers by HTTP status, as upstream sent them (before any fault of the proxy). */
  statuses: Record<number, number>;
}

/** A running proxy. */
export interface FaultProxy {
  readonly host: string;
  readonly port: number;
  /** `url` with its host and port replaced by the proxy's (for base URLs of the proxied service). */
  rewrite(url: string): string;
  /** Replaces the fault settings; fields left out take their defaults (no fault). */
  setFaults(settings: ProxyFaultSettingsInput): void;
  /** A copy of the counters. */
  counts(): FaultProxyCounts;
  /** Client connections open now. */
  openConnections(): number;
  /** Stops listening and ends every connection (RST, so that no client waits); resolves once closed. */
  close(): Promise<void>;
}

type Plan =
  | { kind: 'none' }
  | { kind: typeof ProxyFault.Reset; phase: ProxyPhase }
  | { kind: typeof ProxyFault.Stall; phase: ProxyPhase; ms: number | undefined }
  | { kind: typeof ProxyFault.Cut }
  | { kind: typeof ProxyFault.Latency; ms: number };

const NONE: Plan = { kind: 'none' };
const STATUS_LINE = /^HTTP\/1\.[01] (\d{3})/;

function parseSettings(input: ProxyFaultSettingsInput): ProxyFaultSettings {
  const parsed = settingsSchema.safeParse(input);
  if (!parsed.success) throw new FaultProxyConfigError(describeIssues(parsed.error));
  return parsed.data;
}

/** Starts a fault proxy on loopback in front of `targetHost:targetPort`. */
export async function startFaultProxy(options: FaultProxyOptions): Promise<FaultProxy> {
  let settings = parseSettings(options.faults ?? {});
  const random: SeededRandom = mulberry32(options.seed ?? 1);
  const targetHost = options.targetHost ?? '127.0.0.1';
  const counts: FaultProxyCounts = {
    connections: 0,
    exchanges: 0,
    injected: { reset: 0, stall: 0, cut: 0, latency: 0 },
    beforeRequest: { reset: 0, stall: 0 },
    upstreamResets: 0,
    statuses: {},
  };
  const closers = new Set<() => void>();

  function roll(): Plan {
    const p = settings.probabilities;
    const r = random();
    let cumulative = 0;
    for (const kind of DESTRUCTIVE) {
      cumulative += p[kind];
      if (r >= cumulative) continue;
      const phase = random() < settings.answerPhaseShare ? ProxyPhase.Answer : ProxyPhase.Request;
      switch (kind) {
        case ProxyFault.Reset:
          return { kind, phase };
        case ProxyFault.Stall: {
          const range = settings.stallMs;
          return { kind, phase, ms: range === null ? undefined : uniformInt(random, range.minMs, range.maxMs) };
        }
        case ProxyFault.Cut:
          return { kind };
      }
    }
    if (p.latency > 0 && random() < p.latency) {
      return { kind: ProxyFault.Latency, ms: uniformInt(random, settings.latencyMs.minMs, settings.latencyMs.maxMs) };
    }
    return NONE;
  }

  function handle(client: Socket): void {
    counts.connections++;
    const upstream = net.connect({ host: targetHost, port: options.targetPort });
    const timers = new Set<NodeJS.Timeout>();
    let closed = false;
    let awaitingRequest = true;
    let answerStarted = false;
    let cut = false;
    let plan: Plan = NONE;
    // Bytes in each direction go through a promise chain, so that a delay holds what follows it, in order.
    let toUpstream: Promise<void> = Promise.resolve();
    let toClient: Promise<void> = Promise.resolve();

    const finish = (reset: boolean) => {
      if (closed) return;
      closed = true;
      closers.delete(closeNow);
      for (const timer of timers) clearTimeout(timer);
      timers.clear();
      if (reset && !client.destroyed) client.resetAndDestroy();
      else client.destroy();
      upstream.destroy();
    };
    const closeNow = () => finish(true);
    closers.add(closeNow);

    /** A delay that the connection's end cancels; `undefined` waits until then. */
    const hold = (ms: number | undefined) =>
      new Promise<void>((resolve) => {
        if (ms === undefined) return;
        const timer = setTimeout(() => {
          timers.delete(timer);
          resolve();
        }, ms);
        timers.add(timer);
      });
    const sendUp = (step: () => unknown) => {
      toUpstream = toUpstream.then(() => void (closed || step()));
    };
    const sendDown = (step: () => unknown) => {
      toClient = toClient.then(() => void (closed || step()));
    };

    client.on('data', (chunk: Buffer) => {
      if (awaitingRequest) {
        awaitingRequest = false;
        answerStarted = false;
        counts.exchanges++;
        plan = roll();
        if (plan.kind === ProxyFault.Reset && plan.phase === ProxyPhase.Request) {
          counts.injected.reset++;
          counts.beforeRequest.reset++;
          return finish(true);
        }
        if (plan.kind === ProxyFault.Stall && plan.phase === ProxyPhase.Request) {
          counts.injected.stall++;
          counts.beforeRequest.stall++;
          const ms = plan.ms;
          toUpstream = toUpstream.then(() => hold(ms));
        }
      }
      sendUp(() => upstream.write(chunk));
    });

    upstream.on('data', (chunk: Buffer) => {
      if (cut) return;
      if (!answerStarted) {
        answerStarted = true;
        awaitingRequest = true;
        const status = STATUS_LINE.exec(chunk.subarray(0, 16).toString('latin1'))?.[1];
        if (status !== undefined) counts.statuses[Number(status)] = (counts.statuses[Number(status)] ?? 0) + 1;
        switch (plan.kind) {
          case ProxyFault.Reset:
            counts.injected.reset++;
            return finish(true);
          case ProxyFault.Cut: {
            counts.injected.cut++;
            cut = true;
            const kept = chunk.subarray(0, Math.floor(random() * chunk.length));
            sendDown(() => client.end(kept));
            sendDown(() => upstream.destroy());
            return;
          }
          case ProxyFault.Stall:
            if (plan.phase === ProxyPhase.Answer) {
              counts.injected.stall++;
              const ms = plan.ms;
              toClient = toClient.then(() => hold(ms));
            }
            break;
          case ProxyFault.Latency: {
            counts.injected.latency++;
            const ms = plan.ms;
            toClient = toClient.then(() => hold(ms));
            break;
          }
          case 'none':
            break;
        }
      }
      sendDown(() => client.write(chunk));
    });

    client.on('end', () => sendUp(() => upstream.end()));
    upstream.on('end', () => sendDown(() => client.end()));
    client.on('close', () => finish(false));
    // Ended, not destroyed: what is still queued for the client must reach it first.
    upstream.on('close', () => sendDown(() => client.end()));
    client.on('error', () => finish(false));
    upstream.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'ECONNRESET') counts.upstreamResets++;
      finish(true);
    });
  }

  const server = net.createServer(handle);
  const host = options.host ?? '127.0.0.1';
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, host, () => {
      server.removeListener('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  let closing: Promise<void> | undefined;

  return {
    host,
    port,
    rewrite: (url) => {
      const u = new URL(url);
      u.hostname = host;
      u.port = String(port);
      return u.toString().replace(/\/$/, url.endsWith('/') ? '/' : '');
    },
    setFaults: (input) => {
      settings = parseSettings(input);
    },
    counts: () => ({
      ...counts,
      injected: { ...counts.injected },
      beforeRequest: { ...counts.beforeRequest },
      statuses: { ...counts.statuses },
    }),
    openConnections: () => closers.size,
    close: () => {
      closing ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const close of [...closers]) close();
      });
      return closing;
    },
  };
}
