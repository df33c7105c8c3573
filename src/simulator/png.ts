import { crc32, deflateSync } from 'node:zlib';
import { hash32, mulberry32 } from './random';

/**
 * A tiny PNG encoder (8-bit RGB, filter 0, one IDAT) and a deterministic picture: the same prompt, seed and
 * image index always give the same bytes, so tests can compare downloads. `zlib.crc32` needs Node >= 20.15.
 */

const SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

function chunk(type: string, data: Buffer): Buffer {
  const out = Buffer.alloc(12 + data.length);
  out.writeUInt32BE(data.length, 0);
  out.write(type, 4, 'ascii');
  data.copy(out, 8);
  out.writeUInt32BE(crc32(out.subarray(4, 8 + data.length)), 8 + data.length);
  return out;
}

/** Encodes `rgb` (width x height x 3 bytes, row-major) as a PNG file. */
export function encodePng(width: number, height: number, rgb: Uint8Array): Buffer {
  if (rgb.length !== width * height * 3) throw new RangeError('rgb must hold width * height * 3 bytes');
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  header[8] = 8; // bit depth
  header[9] = 2; // colour type: RGB
  const raw = Buffer.alloc((width * 3 + 1) * height);
  for (let y = 0; y < height; y++) {
    const row = y * (width * 3 + 1);
    raw[row] = 0; // filter: none
    raw.set(rgb.subarray(y * width * 3, (y + 1) * width * 3), row + 1);
  }
  return Buffer.concat([
    SIGNATURE,
    chunk('IHDR', header),
    chunk('IDAT', deflateSync(raw)),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

/** A gradient with a few rings, coloured from the prompt and seed. */
export function renderImage(prompt: string, seed: number, index: number, width = 64, height = 64): Buffer {
  const random = mulberry32(hash32(`${prompt}\u0000${index}`, seed));
  const base = [0, 1, 2].map(() => Math.floor(random() * 256));
  const tint = [0, 1, 2].map(() => Math.floor(random() * 256));
  const cx = random() * width;
  const cy = random() * height;
  const rings = 2 + Math.floor(random() * 6);
  const rgb = new Uint8Array(width * height * 3);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const t = (x + y) / (width + height);
      const ring = Math.floor((Math.hypot(x - cx, y - cy) / Math.max(width, height)) * rings * 2) % 2;
      const o = (y * width + x) * 3;
      for (let c = 0; c < 3; c++) {
        const v = (base[c] ?? 0) * (1 - t) + (tint[c] ?? 0) * t;
        rgb[o + c] = ring ? 255 - v : v;
      }
    }
  }
  return encodePng(width, height, rgb);
}
