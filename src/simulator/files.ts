import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { Phase, phaseAt, type Creation } from './creations';
import { filesConfigSchema, type FilesConfig } from './files-config';
import { renderImage } from './png';
import { LOGS_PATH } from './record-extras';

/** A request that reached the files port, kept so tests can prove the API key never went there. */
export interface SeenRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
}

const MAX_SEEN = 1000;
/** An image's address in a record, and (with `files.redirect`) where it redirects to. */
const FILE_PATH = /^\/(files|blob)\/(cr_[0-9A-Z]+)-(\d+)\.png$/;

/** Pixels per side of a served image: the requested size scaled down 16 times (1024 gives 64). */
const SCALE = 16;

/** Image `index` of a creation, as the files port serves it (and the inline record shapes carry it). */
export function imageOf(creation: Creation, index: number): Buffer {
  return renderImage(
    creation.prompt,
    creation.seed,
    index,
    Math.max(1, Math.round(creation.width / SCALE)),
    Math.max(1, Math.round(creation.height / SCALE)),
  );
}

/**
 * The image host: `/files/<creationId>-<n>.png` of succeeded creations, without any key, like a CDN on
 * another origin. Images are rendered on demand from the prompt and seed (deterministic).
 */
export function createFilesServer(
  find: (id: string) => Creation | undefined,
  now: () => number,
  options: FilesConfig = filesConfigSchema.parse(undefined),
): {
  server: Server;
  seen: SeenRequest[];
} {
  const seen: SeenRequest[] = [];
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    seen.push({ method: req.method ?? 'GET', path, headers: { ...req.headers } });
    if (seen.length > MAX_SEEN) seen.splice(0, seen.length - MAX_SEEN);
    if (path.startsWith('/jobs/')) {
      // A job's web page (the `queue` record shape links to it): no image.
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      res.end('<!doctype html><title>job</title><p>Your image is ready.</p>');
      return;
    }
    const logs = LOGS_PATH.exec(path);
    if (logs?.[1] !== undefined && find(logs[1])) {
      // A creation's logs (the `links` of a record point here): text, no image.
      res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' });
      res.end(`${logs[1]}: queued\n${logs[1]}: running\n`);
      return;
    }
    const match = FILE_PATH.exec(path);
    const creation = match?.[2] !== undefined ? find(match[2]) : undefined;
    const index = Number(match?.[3]);
    if (creation && options.expireAfterMs !== null && now() >= creation.finishedAt + options.expireAfterMs) {
      res.writeHead(options.expiredStatus, { 'content-type': 'text/plain' });
      res.end('expired');
      return;
    }
    if (
      (req.method !== 'GET' && req.method !== 'HEAD') ||
      !creation ||
      phaseAt(creation, now()) !== Phase.Succeeded ||
      !(index < creation.numImages)
    ) {
      res.writeHead(404, { 'content-type': 'text/plain' });
      res.end('not found');
      return;
    }
    if (options.redirect && match?.[1] === 'files') {
      res.writeHead(302, { location: path.replace('/files/', '/blob/'), 'content-length': '0' });
      res.end();
      return;
    }
    const png = imageOf(creation, index);
    res.writeHead(200, { 'content-type': options.contentType, 'content-length': String(png.length) });
    res.end(req.method === 'HEAD' ? undefined : png);
  });
  return { server, seen };
}
