import type { IncomingHttpHeaders } from 'node:http';
import { AuthDetail } from '../api/contract';
import { hashApiKey, type AccountConfig } from './config';

/** Who made a request: the account and the key id (never the key). */
export interface Principal {
  accountId: string;
  keyId: string;
}

export type AuthResult = { ok: true; principal: Principal } | { ok: false; status: 401 | 403; detail: AuthDetail };

interface KeyEntry {
  keyId: string;
  accountId: string;
  revoked: boolean;
}

/** Run-time changes of keys and accounts, as persistence saves them. */
export interface KeyRingChanges {
  addedKeys: { accountId: string; keyId: string; sha256: string }[];
  revokedKeys: string[];
  disabledAccounts: { accountId: string; disabled: boolean }[];
}

/** The credential a request carries: `Authorization: Bearer` first, then `X-API-Key`. */
export function credentialOf(headers: IncomingHttpHeaders): string | undefined {
  const authorization = headers.authorization;
  if (authorization !== undefined) {
    const match = /^\s*Bearer\s+(\S*)\s*$/i.exec(authorization);
    if (match?.[1]) return match[1];
  }
  const header = headers['x-api-key'];
  const value = (Array.isArray(header) ? header[0] : header)?.trim();
  if (value) return value;
  // An Authorization header of another scheme is a credential, just not one we recognize.
  if (authorization !== undefined && authorization.trim() !== '' && !/^\s*Bearer\s*$/i.test(authorization))
    return authorization;
  return undefined;
}

/**
 * Keys by sha256, accounts' disabled flags. Revocation and disabling take effect on the next request,
 * as the interface requires.
 */
export class KeyRing {
  private readonly byHash = new Map<string, KeyEntry>();
  private readonly byId = new Map<string, KeyEntry>();
  private readonly disabled = new Map<string, boolean>();
  private readonly models = new Map<string, ReadonlySet<string>>();
  /** What changed at run time (on top of the config): what persistence saves. */
  private readonly changes: KeyRingChanges = { addedKeys: [], revokedKeys: [], disabledAccounts: [] };

  constructor(accounts: readonly AccountConfig[]) {
    for (const account of accounts) {
      this.disabled.set(account.id, account.disabled);
      this.models.set(account.id, new Set(account.models));
      for (const key of account.keys) this.insert(account.id, key.id, key.sha256, key.revoked);
    }
  }

  /** Adds a key by hash (the plaintext never reaches the ring). */
  add(accountId: string, keyId: string, sha256: string): void {
    this.insert(accountId, keyId, sha256, false);
    this.changes.addedKeys.push({ accountId, keyId, sha256 });
  }

  private insert(accountId: string, keyId: string, sha256: string, revoked: boolean): void {
    if (!this.disabled.has(accountId)) throw new Error(`unknown account "${accountId}"`);
    if (this.byId.has(keyId)) throw new Error(`duplicate key id "${keyId}"`);
    const entry = { keyId, accountId, revoked };
    this.byHash.set(sha256, entry);
    this.byId.set(keyId, entry);
  }

  /** Keys added, keys revoked and accounts enabled or disabled since the start (hashes only). */
  runtimeChanges(): KeyRingChanges {
    return {
      addedKeys: this.changes.addedKeys.map((k) => ({ ...k })),
      revokedKeys: [...this.changes.revokedKeys],
      disabledAccounts: this.changes.disabledAccounts.map((a) => ({ ...a })),
    };
  }

  /**
   * Replays saved run-time changes on top of the config. Changes that no longer fit it (an account or key the
   * config lost, a key id it now defines itself) are left out.
   */
  replayChanges(changes: KeyRingChanges): void {
    for (const key of changes.addedKeys) {
      if (this.disabled.has(key.accountId) && !this.byId.has(key.keyId)) this.add(key.accountId, key.keyId, key.sha256);
    }
    for (const keyId of changes.revokedKeys) if (this.byId.has(keyId)) this.revoke(keyId);
    for (const account of changes.disabledAccounts) {
      if (this.disabled.has(account.accountId)) this.setAccountDisabled(account.accountId, account.disabled);
    }
  }

  authenticate(headers: IncomingHttpHeaders): AuthResult {
    const credential = credentialOf(headers);
    if (credential === undefined) return { ok: false, status: 401, detail: AuthDetail.AuthenticationRequired };
    const entry = this.byHash.get(hashApiKey(credential));
    if (!entry || entry.revoked) return { ok: false, status: 401, detail: AuthDetail.ApiKeyInvalid };
    if (this.disabled.get(entry.accountId)) return { ok: false, status: 403, detail: AuthDetail.AccountDisabled };
    return { ok: true, principal: { accountId: entry.accountId, keyId: entry.keyId } };
  }

  revoke(keyId: string): void {
    const entry = this.byId.get(keyId);
    if (!entry) throw new Error(`unknown key id "${keyId}"`);
    entry.revoked = true;
    if (!this.changes.revokedKeys.includes(keyId)) this.changes.revokedKeys.push(keyId);
  }

  setAccountDisabled(accountId: string, disabled: boolean): void {
    if (!this.disabled.has(accountId)) throw new Error(`unknown account "${accountId}"`);
    this.disabled.set(accountId, disabled);
    const changes = this.changes.disabledAccounts.filter((a) => a.accountId !== accountId);
    changes.push({ accountId, disabled });
    this.changes.disabledAccounts = changes;
  }

  hasAccount(accountId: string): boolean {
    return this.disabled.has(accountId);
  }

  modelsOf(accountId: string): ReadonlySet<string> {
    return this.models.get(accountId) ?? new Set();
  }
}
