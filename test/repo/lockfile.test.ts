import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * What set-up relies on in package-lock.json: `npm ci` installs it as it is, and npm finds nothing to add or change
 * in it on any platform (a fresh clone's tree stays clean, `npm install --package-lock-only` changes nothing).
 */
const ROOT = path.join(__dirname, '..', '..');

interface LockEntry {
  name?: string;
  version?: string;
  dev?: boolean;
  devOptional?: boolean;
  hasInstallScript?: boolean;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
}

interface PackageJson {
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
  scripts?: Record<string, string>;
}

const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as PackageJson;
const lock = JSON.parse(readFileSync(path.join(ROOT, 'package-lock.json'), 'utf8')) as {
  lockfileVersion: number;
  packages: Record<string, LockEntry>;
};
const entries = Object.entries(lock.packages).filter(([key]) => key !== '');

/** A version with a prerelease part (`3.0.0-canary.1`), as semver writes one. */
const PRERELEASE = /^\d+\.\d+\.\d+-/;

/**
 * Prerelease versions allowed in the production tree, each with the package that pins it (not us).
 * Adding one needs a reason here.
 */
const PINNED_BY_OTHERS: Record<string, { version: string; pinnedBy: string }> = {
  // The Temporal SDK's own duration reader; we call it through @temporalio/common/lib/time, never directly.
  'node_modules/ms': { version: '3.0.0-canary.1', pinnedBy: 'node_modules/@temporalio/common' },
};

/** The lock entry Node would load for `name` required from the package at `from` (`''` for the project). */
function resolve(from: string, name: string): string | undefined {
  let dir = from;
  for (;;) {
    const key = `${dir === '' ? '' : `${dir}/`}node_modules/${name}`;
    if (lock.packages[key]) return key;
    if (dir === '') return undefined;
    const up = dir.lastIndexOf('/node_modules/');
    dir = up < 0 ? '' : dir.slice(0, up);
  }
}

/** Whether npm runs an install script for the package installed at `key`: its own, or `node-gyp rebuild`. */
function hasInstallScript(key: string): boolean | undefined {
  const file = path.join(ROOT, key, 'package.json');
  if (!existsSync(file)) return undefined; // another platform's optional package
  const { scripts = {} } = JSON.parse(readFileSync(file, 'utf8')) as PackageJson;
  // npm runs `node-gyp rebuild` for a package with a binding.gyp and no install script of its own, even when its
  // package.json says `"gypfile": false` (better-sqlite3 13): a fresh install marks it, so the lock must too.
  return (
    Boolean(scripts.preinstall ?? scripts.install ?? scripts.postinstall) ||
    existsSync(path.join(ROOT, key, 'binding.gyp'))
  );
}

describe('package-lock.json', () => {
  it('is a version 3 lock of exactly the dependencies package.json names (npm ci refuses one out of step)', () => {
    expect(lock.lockfileVersion).toBe(3);
    const root = lock.packages[''];
    expect(root?.dependencies ?? {}).toEqual(pkg.dependencies ?? {});
    expect(root?.optionalDependencies ?? {}).toEqual(pkg.optionalDependencies ?? {});
    expect(root?.devDependencies ?? {}).toEqual(pkg.devDependencies ?? {});
  });

  it("records every package every entry needs, so npm has nothing to add on any platform (others' native ones too)", () => {
    const missing: string[] = [];
    let edges = 0;
    for (const [key, entry] of Object.entries(lock.packages)) {
      const peers = Object.keys(entry.peerDependencies ?? {}).filter((p) => !entry.peerDependenciesMeta?.[p]?.optional);
      const needs = [
        ...Object.keys(entry.dependencies ?? {}),
        ...Object.keys(entry.optionalDependencies ?? {}),
        ...peers,
      ];
      for (const name of needs) {
        edges++;
        if (resolve(key, name) === undefined) missing.push(`${key || '(project)'} needs ${name}`);
      }
    }
    expect(missing).toEqual([]);
    expect(edges).toBeGreaterThan(100);
    // The native packages of esbuild, rolldown and the others: one per platform, each recorded.
    for (const parent of ['node_modules/esbuild', 'node_modules/rolldown']) {
      const optional = Object.keys(lock.packages[parent]?.optionalDependencies ?? {});
      expect(optional.length, parent).toBeGreaterThan(10);
    }
  });

  it('marks every installed package that has an install script, and no other (as a fresh `npm install` writes it)', () => {
    const wrong: string[] = [];
    let checked = 0;
    for (const [key, entry] of entries) {
      const has = hasInstallScript(key);
      if (has === undefined) continue;
      checked++;
      if (has !== Boolean(entry.hasInstallScript)) {
        wrong.push(`${key}: ${has ? 'has an install script, not marked' : 'marked, has no install script'}`);
      }
    }
    expect(wrong).toEqual([]);
    expect(checked).toBeGreaterThan(100); // node_modules is there (set-up ran), so the check saw the packages
  });

  it('names released versions only in our production dependencies', () => {
    const direct = { ...pkg.dependencies, ...pkg.optionalDependencies };
    const notExact = Object.entries(direct)
      .map(([name, spec]) => [name, spec.replace(/^npm:(@?[^@]+)@/, '')] as const)
      .filter(([, version]) => !/^\d+\.\d+\.\d+$/.test(version));
    expect(notExact).toEqual([]);
  });

  it('holds no prerelease in the production tree but those pinned by a dependency, listed above', () => {
    const production = entries.filter(([, entry]) => !entry.dev && !entry.devOptional);
    expect(production.length).toBeGreaterThan(20);
    const prerelease = production
      .filter(([, entry]) => PRERELEASE.test(entry.version ?? ''))
      .map(([key, entry]) => `${key}@${entry.version}`);
    const allowed = Object.entries(PINNED_BY_OTHERS).map(([key, { version }]) => `${key}@${version}`);
    expect(prerelease.filter((p) => !allowed.includes(p))).toEqual([]);
    for (const [key, { version, pinnedBy }] of Object.entries(PINNED_BY_OTHERS)) {
      const name = key.slice(key.lastIndexOf('node_modules/') + 'node_modules/'.length);
      expect(lock.packages[pinnedBy]?.dependencies?.[name], `${pinnedBy} pins ${name}`).toBe(version);
      expect(pkg.dependencies?.[name], `${name} is no direct dependency of ours`).toBeUndefined();
    }
  });
});
