import { readFileSync } from 'node:fs';

/**
 * Summarises a V8 `.cpuprofile` (from `node --cpu-prof`): self time per function and per area (a package, Node's
 * internals, the project's own code, garbage collection, idle), so BENCHMARKS.md can say where the time goes
 * without committing profiles.
 */

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

export interface ProfileEntry {
  name: string;
  selfMs: number;
  share: number;
}

export interface ProfileSummary {
  /** Wall time the profile covers, ms. */
  totalMs: number;
  /** Time not idle, ms. */
  busyMs: number;
  functions: ProfileEntry[];
  areas: ProfileEntry[];
}

/** The area of a script URL: `@temporalio/worker`, `undici`, `node:internal`, `imagebatch src`, ... */
export function areaOf(url: string, functionName: string): string {
  if (!url) {
    if (functionName === '(idle)') return '(idle)';
    if (functionName === '(garbage collector)') return '(garbage collector)';
    if (functionName === '(program)') return '(program: native, V8 and the SDK core)';
    return `(${functionName || 'native'})`;
  }
  // The workflow bundle (the SDK's workflow library and our workflows, run in the sandbox) before anything else:
  // it lives in dist/ when the worker uses its cached bundle.
  if (url.includes('workflow-bundle')) return 'workflow bundle';
  const nm = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (nm?.[1]) return nm[1];
  if (url.startsWith('node:')) return 'node: built-ins';
  if (url.includes('/dist/') || url.includes('/src/')) return 'imagebatch code';
  return url;
}

export function summariseProfile(file: string, top = 12): ProfileSummary {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const selfUs = new Map<number, number>();
  profile.samples.forEach((id, i) => selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)));
  const fn = new Map<string, number>();
  const area = new Map<string, number>();
  let idleUs = 0;
  let totalUs = 0;
  for (const [id, us] of selfUs) {
    const node = byId.get(id);
    if (!node) continue;
    const { functionName, url, lineNumber } = node.callFrame;
    totalUs += us;
    if (functionName === '(idle)') idleUs += us;
    const where = url
      ? `${url.replace(/^.*node_modules\//, '').replace(/^.*\/(dist|src)\//, '$1/')}:${lineNumber + 1}`
      : '';
    const key = `${functionName || '(anonymous)'}${where ? ` ${where}` : ''}`;
    fn.set(key, (fn.get(key) ?? 0) + us);
    const a = areaOf(url, functionName);
    area.set(a, (area.get(a) ?? 0) + us);
  }
  const busyUs = totalUs - idleUs;
  const rank = (m: Map<string, number>) =>
    [...m]
      .filter(([name]) => name !== '(idle)')
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([name, us]) => ({ name, selfMs: us / 1000, share: busyUs ? us / busyUs : 0 }));
  return { totalMs: totalUs / 1000, busyMs: busyUs / 1000, functions: rank(fn), areas: rank(area) };
}
