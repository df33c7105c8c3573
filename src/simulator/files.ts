import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { Phase, phaseAt, type Creation } from './creations';
import { renderImage } from './png';

/** A request that reached the files port, kept so tests can prove the API key never went there. */
export interface SeenRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
}

const MAX_SEEN = 1000;
const FILE_PATH = /^\/files\/(cr_[0-9A-Z]+)-(\d+)\.png$/;

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
): {
  server: Server;
  seen: SeenRequest[];
} {
  const seen: SeenRequest[] = [];
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    seen.push({ method: req.method ?? 'GET', path, headers: { ...req.headers } });
    if (seen.length > MAX_SEEN) seen.splice(0, seen.length - MAX_SEEN);
    const match = FILE_PATH.exec(path);
    const creation = match?.[1] !== undefined ? find(match[1]) : undefined;
    const index = Number(match?.[2]);
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
    const png = imageOf(creation, index);
    res.writeHead(200, { 'content-type': 'image/png', 'content-length': String(png.length) });
    res.end(req.method === 'HEAD' ? undefined : png);
  });
  return { server, seen };
}
