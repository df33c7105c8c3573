import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Readable, Writable } from 'node:stream';

/**
 * Headless Chromium driven over the DevTools protocol on `--remote-debugging-pipe`: Chromium reads
 * NUL-terminated JSON commands on fd 3 and writes replies and events on fd 4. No port, no WebSocket (Node 20
 * has no built-in client), no dependency; the browser is its own process group, killed whatever happens.
 */

const CANDIDATES = ['chromium', 'chromium-browser'];

/** The Chromium binary: IMAGEBATCH_CHROMIUM, else `chromium` on PATH. Throws a clear error when there is none. */
export function findChromium(env: NodeJS.ProcessEnv = process.env): string {
  const explicit = env.IMAGEBATCH_CHROMIUM;
  if (explicit) {
    if (!isExecutable(explicit)) throw new Error(`IMAGEBATCH_CHROMIUM=${explicit} is not an executable file`);
    return explicit;
  }
  for (const dir of (env.PATH ?? '').split(path.delimiter).filter(Boolean)) {
    for (const name of CANDIDATES) {
      const file = path.join(dir, name);
      if (isExecutable(file)) return file;
    }
  }
  if (isExecutable('/usr/bin/chromium')) return '/usr/bin/chromium';
  throw new Error(
    'Chromium is not installed, and the gallery browser test needs it: run `node scripts/setup.mjs` as root ' +
      '(it runs `apt-get install -y --no-install-recommends chromium`), install it yourself, or set ' +
      'IMAGEBATCH_CHROMIUM to a Chromium binary.',
  );
}

function isExecutable(file: string): boolean {
  try {
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** The version line of a Chromium binary (for messages), or undefined. */
export function chromiumVersion(executable: string): string | undefined {
  const r = spawnSync(executable, ['--version'], { encoding: 'utf8', timeout: 15_000 });
  return r.status === 0 ? /Chromium[^\n]*/.exec(r.stdout)?.[0] : undefined;
}

interface Pending {
  resolve: (result: Record<string, unknown>) => void;
  reject: (err: Error) => void;
  timer: NodeJS.Timeout;
}

interface CdpMessage {
  id?: number;
  method?: string;
  sessionId?: string;
  params?: Record<string, unknown>;
  result?: Record<string, unknown>;
  error?: { message: string };
}

/** A headless Chromium and one DevTools session on a page of it. */
export class HeadlessChromium {
  private nextId = 0;
  private buffer = '';
  private stderrTail = '';
  private readonly pending = new Map<number, Pending>();
  private readonly listeners = new Set<(m: CdpMessage) => void>();
  private readonly exited: Promise<void>;

  private constructor(
    private readonly child: ChildProcess,
    private readonly userDataDir: string,
  ) {
    this.exited = new Promise((resolve) => child.once('exit', () => resolve()));
    const out = child.stdio[4] as Readable;
    out.on('data', (chunk: Buffer) => this.receive(chunk.toString('utf8')));
    child.stderr?.on('data', (chunk: Buffer) => {
      this.stderrTail = (this.stderrTail + chunk.toString('utf8')).slice(-4096);
    });
    child.once('exit', (code, signal) => {
      for (const [id, p] of this.pending) {
        clearTimeout(p.timer);
        p.reject(new Error(`Chromium exited (${signal ?? code}) before answering #${id}:\n${this.stderrTail}`));
      }
      this.pending.clear();
    });
  }

  /** Starts Chromium headless with a fresh profile in a temporary folder. */
  static async launch(
    executable: string,
    options: { width?: number; height?: number } = {},
  ): Promise<HeadlessChromium> {
    const userDataDir = await mkdtemp(path.join(os.tmpdir(), 'imagebatch-chromium-'));
    const args = [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--disable-dev-shm-usage',
      '--hide-scrollbars',
      '--mute-audio',
      `--window-size=${options.width ?? 1280},${options.height ?? 900}`,
      `--user-data-dir=${userDataDir}`,
      '--remote-debugging-pipe',
      'about:blank',
    ];
    const child = spawn(executable, args, {
      stdio: ['ignore', 'ignore', 'pipe', 'pipe', 'pipe'],
      detached: true, // its own process group, so that close() also ends every helper process it started
    });
    const browser = new HeadlessChromium(child, userDataDir);
    await new Promise<void>((resolve, reject) => {
      child.once('spawn', resolve);
      child.once('error', reject);
    }).catch(async (err: unknown) => {
      await browser.close();
      throw err;
    });
    return browser;
  }

  private receive(text: string): void {
    this.buffer += text;
    for (let end = this.buffer.indexOf('\0'); end >= 0; end = this.buffer.indexOf('\0')) {
      const message = JSON.parse(this.buffer.slice(0, end)) as CdpMessage;
      this.buffer = this.buffer.slice(end + 1);
      const pending = message.id === undefined ? undefined : this.pending.get(message.id);
      if (pending && message.id !== undefined) {
        this.pending.delete(message.id);
        clearTimeout(pending.timer);
        if (message.error) pending.reject(new Error(`DevTools: ${message.error.message}`));
        else pending.resolve(message.result ?? {});
      } else {
        for (const listener of this.listeners) listener(message);
      }
    }
  }

  /** Sends one DevTools command and resolves with its result; rejects after `timeoutMs`. */
  send<T = Record<string, unknown>>(
    method: string,
    params: Record<string, unknown> = {},
    sessionId?: string,
    timeoutMs = 20_000,
  ): Promise<T> {
    const id = ++this.nextId;
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`DevTools ${method} had no answer within ${timeoutMs} ms:\n${this.stderrTail}`));
      }, timeoutMs);
      this.pending.set(id, { resolve: resolve as (r: Record<string, unknown>) => void, reject, timer });
      (this.child.stdio[3] as Writable).write(`${JSON.stringify({ id, method, params, sessionId })}\0`);
    });
  }

  /** Resolves with the params of the next event `method` of `sessionId`; rejects after `timeoutMs`. */
  nextEvent(method: string, sessionId: string, timeoutMs = 20_000): Promise<Record<string, unknown>> {
    return new Promise((resolve, reject) => {
      const listener = (m: CdpMessage) => {
        if (m.method !== method || m.sessionId !== sessionId) return;
        this.listeners.delete(listener);
        clearTimeout(timer);
        resolve(m.params ?? {});
      };
      const timer = setTimeout(() => {
        this.listeners.delete(listener);
        reject(new Error(`no ${method} event within ${timeoutMs} ms`));
      }, timeoutMs);
      this.listeners.add(listener);
    });
  }

  /** Opens a page at `url`, waits for its load event, and returns the session id that drives it. */
  async open(url: string): Promise<string> {
    const { targetId } = await this.send<{ targetId: string }>('Target.createTarget', { url: 'about:blank' });
    const { sessionId } = await this.send<{ sessionId: string }>('Target.attachToTarget', { targetId, flatten: true });
    await this.send('Page.enable', {}, sessionId);
    const loaded = this.nextEvent('Page.loadEventFired', sessionId);
    const nav = await this.send<{ errorText?: string }>('Page.navigate', { url }, sessionId);
    if (nav.errorText) throw new Error(`Chromium could not open ${url}: ${nav.errorText}`);
    await loaded;
    return sessionId;
  }

  /** Evaluates an expression in the page (awaiting a promise) and returns its value as JSON. */
  async evaluate<T>(sessionId: string, expression: string, timeoutMs = 20_000): Promise<T> {
    const r = await this.send<{
      result: { value?: unknown };
      exceptionDetails?: { text: string; exception?: unknown };
    }>('Runtime.evaluate', { expression, awaitPromise: true, returnByValue: true }, sessionId, timeoutMs);
    if (r.exceptionDetails) throw new Error(`the page threw: ${JSON.stringify(r.exceptionDetails)}`);
    return r.result.value as T;
  }

  /** A PNG of the whole page, not only the window. */
  async screenshot(sessionId: string): Promise<Buffer> {
    const metrics = await this.send<{ cssContentSize: { width: number; height: number } }>(
      'Page.getLayoutMetrics',
      {},
      sessionId,
    );
    const { width, height } = metrics.cssContentSize;
    const shot = await this.send<{ data: string }>(
      'Page.captureScreenshot',
      { format: 'png', captureBeyondViewport: true, clip: { x: 0, y: 0, width, height, scale: 1 } },
      sessionId,
    );
    return Buffer.from(shot.data, 'base64');
  }

  /** Closes the browser (Browser.close, then SIGKILL of its process group) and removes its profile. */
  async close(): Promise<void> {
    const running = () => this.child.exitCode === null && this.child.signalCode === null;
    if (running() && this.child.pid !== undefined) {
      await this.send('Browser.close', {}, undefined, 3000).catch(() => undefined);
      const timer = setTimeout(() => this.killGroup(), 3000);
      await this.exited;
      clearTimeout(timer);
    }
    this.killGroup(); // helper processes that outlived the browser process
    await rm(this.userDataDir, { recursive: true, force: true, maxRetries: 3 });
  }

  private killGroup(): void {
    if (this.child.pid === undefined) return;
    try {
      process.kill(-this.child.pid, 'SIGKILL');
    } catch {
      // The group has gone already.
    }
  }
}
