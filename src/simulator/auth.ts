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

  constructor(accounts: readonly AccountConfig[]) {
    for (const account of accounts) {
      this.disabled.set(account.id, account.disabled);
      this.models.set(account.id, new Set(account.models));
      for (const key of account.keys) this.add(account.id, key.id, key.sha256, key.revoked);
    }
  }

  /** Adds a key by hash (the plaintext never reaches the ring). */
  add(accountId: string, keyId: string, sha256: string, revoked = false): void {
    if (!this.disabled.has(accountId)) throw new Error(`unknown account "${accountId}"`);
    if (this.byId.has(keyId)) throw new Error(`duplicate key id "${keyId}"`);
    const entry = { keyId, accountId, revoked };
    this.byHash.set(sha256, entry);
    this.byId.set(keyId, entry);
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
  }

  setAccountDisabled(accountId: string, disabled: boolean): void {
    if (!this.disabled.has(accountId)) throw new Error(`unknown account "${accountId}"`);
    this.disabled.set(accountId, disabled);
  }

  hasAccount(accountId: string): boolean {
    return this.disabled.has(accountId);
  }

  modelsOf(accountId: string): ReadonlySet<string> {
    return this.models.get(accountId) ?? new Set();
  }
}
