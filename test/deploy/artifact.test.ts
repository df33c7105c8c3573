import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ensureDistIsFresh, REPO_ROOT } from '../helpers/dist';

interface ArtifactSummary {
  ok: boolean;
  stages: string[];
  productionPackages: number;
  distFiles: number;
  distSha256: string;
  sameDistAsTests: boolean;
  run: { succeeded: number; images: number; spentUsd: number };
  notes: string[];
  timingsMs: Record<string, number>;
}

/** The digest check-artifact.mjs reports, computed here independently over the dist/ the tests run. */
function distDigest(dir: string): { files: number; digest: string } {
  const entries: string[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    // Dot files are not build output: `.tsbuildinfo`. The workflow bundles are, and count.
    if (!e.isFile() || e.name.startsWith('.')) continue;
    const file = path.join(e.parentPath, e.name);
    entries.push(`${path.relative(dir, file)} ${createHash('sha256').update(readFileSync(file)).digest('hex')}`);
  }
  entries.sort((a, b) => a.split(' ')[0]!.localeCompare(b.split(' ')[0]!));
  return { files: entries.length, digest: createHash('sha256').update(entries.join('\n')).digest('hex') };
}

function runScript(timeoutMs: number): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [path.join(REPO_ROOT, 'scripts', 'check-artifact.mjs'), '--json'], {
      cwd: REPO_ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

describe('the Docker image artefact, built and run outside Docker (scripts/check-artifact.mjs)', () => {
  it('builds the dist/ the tests run, with production dependencies only, and runs a batch with it', async () => {
    await ensureDistIsFresh();
    const before = distDigest(path.join(REPO_ROOT, 'dist'));
    const { code, stdout, stderr } = await runScript(570_000);
    // Another build of this checkout while the check ran would make any comparison meaningless: say so.
    const after = distDigest(path.join(REPO_ROOT, 'dist'));
    expect(after, `dist/ was rebuilt while the check ran; the check said:\n${stderr.slice(-1500)}`).toEqual(before);
    expect(code, stderr).toBe(0);
    const summary = JSON.parse(stdout.trim().split('\n').at(-1)!) as ArtifactSummary;
    expect(summary.ok).toBe(true);
    expect(summary.stages.map((s) => s.split(' ')[0])).toEqual(['build', 'runtime']);
    // Byte for byte the dist/ of this checkout, which the other tests run.
    expect(summary.sameDistAsTests).toBe(true);
    expect({ files: summary.distFiles, digest: summary.distSha256 }).toEqual(before);
    expect(summary.productionPackages).toBeGreaterThan(10);
    expect(summary.run).toMatchObject({ succeeded: 3, images: 3 });
    expect(summary.run.spentUsd).toBeCloseTo(0.12, 6); // three flux-dev rows at $0.04, each paid once
    process.stderr.write(`check-artifact: ${JSON.stringify(summary.timingsMs)}\n`);
  }, 600_000);
});
