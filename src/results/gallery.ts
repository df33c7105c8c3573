import type { ResultRow } from './collect';

const escapeHtml = (s: string) =>
  s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

/** Image paths are relative to the output folder; each segment is URL-encoded so any row id stays a valid link. */
const href = (p: string) => p.split(/[\\/]/).map(encodeURIComponent).join('/');

/**
 * A self-contained gallery page (no scripts, no server, no network): one card per row with its thumbnails,
 * prompt, model, state and error (from the row's record). Opens from disk.
 */
export function galleryHtml(batchId: string, rows: readonly ResultRow[]): string {
  const counts = new Map<string, number>();
  for (const r of rows) counts.set(r.state, (counts.get(r.state) ?? 0) + 1);
  const summary = [...counts].map(([state, n]) => `${n} ${state.replace(/_/g, ' ')}`).join(' · ');
  const cards = rows.map((r) => {
    const images = r.result?.images ?? [];
    const thumbs = images.length
      ? images
          .map(
            (i) =>
              `<a href="${href(i.path)}"><img src="${href(i.path)}" alt="${escapeHtml(r.row.request.prompt)}" loading="lazy"></a>`,
          )
          .join('')
      : `<div class="none">${escapeHtml(r.state.replace(/_/g, ' '))}</div>`;
    const error = r.result?.error ? `<p class="error">${escapeHtml(r.result.error)}</p>` : '';
    const own = Object.entries(r.row.columns ?? {});
    const columns = own.length
      ? `<dl class="columns">${own.map(([k, v]) => `<dt>${escapeHtml(k)}</dt><dd>${escapeHtml(v)}</dd>`).join('')}</dl>`
      : '';
    return `<figure class="card ${escapeHtml(r.state)}" data-row="${escapeHtml(r.row.rowId)}">
  <div class="thumbs">${thumbs}</div>
  <figcaption><b>${escapeHtml(r.row.rowId)}</b> <span class="state">${escapeHtml(r.state)}</span> <span class="model">${escapeHtml(r.row.request.model)}</span>
  <p>${escapeHtml(r.row.request.prompt)}</p>${error}${columns}</figcaption>
</figure>`;
  });
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>imagebatch · ${escapeHtml(batchId)}</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:24px;background:#fafafa;color:#222}
h1{font-size:20px;margin:0 0 4px}.summary{color:#555;margin:0 0 20px}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(200px,1fr));gap:16px}
.card{margin:0;background:#fff;border:1px solid #ddd;border-radius:8px;overflow:hidden}
.thumbs{display:flex;background:#eee;min-height:160px;align-items:center;justify-content:center}
.thumbs a{display:block;flex:1}.thumbs img{width:100%;height:auto;display:block;image-rendering:pixelated}
.none{color:#888;text-transform:uppercase;font-size:12px;letter-spacing:.05em}
figcaption{padding:8px 10px}figcaption p{margin:4px 0 0}
.state{font-size:11px;padding:1px 6px;border-radius:8px;background:#e3f2e3}
.failed .state,.unknown .state,.cancelled .state,.images_unsaved .state{background:#fbe3e3}
.in_flight .state,.not_started .state,.not_run .state{background:#eee}
.model{color:#777;font-size:12px}.error{color:#a33;font-size:12px}
.columns{margin:6px 0 0;font-size:12px;display:grid;grid-template-columns:auto 1fr;gap:0 8px}
.columns dt{color:#777}.columns dd{margin:0;white-space:pre-wrap;overflow-wrap:anywhere}
</style></head>
<body><h1>imagebatch · ${escapeHtml(batchId)}</h1><p class="summary">${rows.length} rows: ${escapeHtml(summary)}</p>
<div class="grid">
${cards.join('\n')}
</div></body></html>
`;
}
