/**
 * A line chart as hand-written SVG (no dependency): lines against a shared x axis, each on the left or the right
 * y axis, with ticks, grid lines and a legend. Enough for the benchmarks' time series.
 */

/** One line of a {@link Chart}. */
export interface Line {
  name: string;
  /** A CSS colour. */
  color: string;
  points: ReadonlyArray<readonly [x: number, y: number]>;
  /**
   * Which y axis the line is read against.
   * @default 'left'
   */
  axis?: 'left' | 'right';
  /**
   * Dashed, to tell the right axis's lines from the left's.
   * @default false
   */
  dashed?: boolean;
}

/** What {@link svgChart} draws. */
export interface Chart {
  title: string;
  xLabel: string;
  leftLabel: string;
  /** @default none: no right axis */
  rightLabel?: string;
  lines: Line[];
  /** Horizontal reference lines on the left axis (a goal), with their labels. @default none */
  leftMarks?: Array<{ y: number; label: string }>;
  /** Horizontal reference lines on the right axis, with their labels. @default none */
  rightMarks?: Array<{ y: number; label: string }>;
  /** Vertical lines at these x (an event, such as a change of a limit), with their labels. @default none */
  xMarks?: Array<{ x: number; label: string }>;
  /** @default 900 */
  width?: number;
  /** @default 480 */
  height?: number;
}

/** About five round ticks from 0 to at least `max`: 1, 2 or 5 times a power of ten apart. */
export function ticks(max: number, count = 5): number[] {
  if (!(max > 0)) return [0, 1];
  const raw = max / count;
  const power = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * power).find((s) => s >= raw) ?? 10 * power;
  const out: number[] = [];
  for (let v = 0; v < max + step - 1e-9; v += step) out.push(Number(v.toPrecision(12)));
  return out;
}

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
const fmt = (v: number) => (Math.abs(v) >= 1000 ? v.toLocaleString('en-US') : String(v));

/** The chart as a standalone SVG document. */
export function svgChart(chart: Chart): string {
  const width = chart.width ?? 900;
  const height = chart.height ?? 480;
  const m = { top: 40, right: chart.rightLabel ? 70 : 20, bottom: 80, left: 70 };
  const w = width - m.left - m.right;
  const h = height - m.top - m.bottom;
  const maxOf = (axis: 'left' | 'right', extra: number[] = []) =>
    Math.max(
      0,
      ...extra,
      ...chart.lines.filter((l) => (l.axis ?? 'left') === axis).flatMap((l) => l.points.map(([, y]) => y)),
    );
  const xTicks = ticks(Math.max(0, ...chart.lines.flatMap((l) => l.points.map(([x]) => x))));
  const leftTicks = ticks(
    maxOf(
      'left',
      (chart.leftMarks ?? []).map((mk) => mk.y),
    ),
  );
  const rightTicks = ticks(
    maxOf(
      'right',
      (chart.rightMarks ?? []).map((mk) => mk.y),
    ),
  );
  const xMax = xTicks.at(-1) ?? 1;
  const leftMax = leftTicks.at(-1) ?? 1;
  const rightMax = rightTicks.at(-1) ?? 1;
  const X = (x: number) => m.left + (x / xMax) * w;
  const Y = (y: number, axis: 'left' | 'right') => m.top + h - (y / (axis === 'left' ? leftMax : rightMax)) * h;
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" ` +
      `font-family="sans-serif" font-size="12">`,
    `<rect width="${width}" height="${height}" fill="white"/>`,
    `<text x="${width / 2}" y="22" text-anchor="middle" font-size="15">${esc(chart.title)}</text>`,
  ];
  for (const v of leftTicks) {
    const y = Y(v, 'left');
    out.push(`<line x1="${m.left}" x2="${m.left + w}" y1="${y}" y2="${y}" stroke="#e4e4e4"/>`);
    out.push(`<text x="${m.left - 6}" y="${y + 4}" text-anchor="end">${fmt(v)}</text>`);
  }
  if (chart.rightLabel) {
    for (const v of rightTicks) {
      out.push(`<text x="${m.left + w + 6}" y="${Y(v, 'right') + 4}">${fmt(v)}</text>`);
    }
  }
  for (const v of xTicks) {
    const x = X(v);
    out.push(`<line x1="${x}" x2="${x}" y1="${m.top + h}" y2="${m.top + h + 5}" stroke="black"/>`);
    out.push(`<text x="${x}" y="${m.top + h + 18}" text-anchor="middle">${fmt(v)}</text>`);
  }
  out.push(
    `<rect x="${m.left}" y="${m.top}" width="${w}" height="${h}" fill="none" stroke="black"/>`,
    `<text x="${m.left + w / 2}" y="${m.top + h + 36}" text-anchor="middle">${esc(chart.xLabel)}</text>`,
    `<text transform="translate(18 ${m.top + h / 2}) rotate(-90)" text-anchor="middle">${esc(chart.leftLabel)}</text>`,
  );
  if (chart.rightLabel) {
    out.push(
      `<text transform="translate(${width - 14} ${m.top + h / 2}) rotate(90)" text-anchor="middle">` +
        `${esc(chart.rightLabel)}</text>`,
    );
  }
  for (const mark of chart.leftMarks ?? []) {
    const y = Y(mark.y, 'left');
    out.push(
      `<line x1="${m.left}" x2="${m.left + w}" y1="${y}" y2="${y}" stroke="#c00" stroke-dasharray="2 4"/>`,
      `<text x="${m.left + 4}" y="${y - 4}" fill="#c00">${esc(mark.label)}</text>`,
    );
  }
  for (const mark of chart.rightMarks ?? []) {
    const y = Y(mark.y, 'right');
    out.push(
      `<line x1="${m.left}" x2="${m.left + w}" y1="${y}" y2="${y}" stroke="#c60" stroke-dasharray="2 4"/>`,
      `<text x="${m.left + w - 4}" y="${y - 4}" text-anchor="end" fill="#c60">${esc(mark.label)}</text>`,
    );
  }
  for (const mark of chart.xMarks ?? []) {
    const x = X(mark.x);
    out.push(
      `<line x1="${x}" x2="${x}" y1="${m.top}" y2="${m.top + h}" stroke="#555" stroke-dasharray="5 3"/>`,
      `<text x="${x + 4}" y="${m.top + 14}" fill="#555">${esc(mark.label)}</text>`,
    );
  }
  for (const line of chart.lines) {
    const axis = line.axis ?? 'left';
    const pts = line.points.map(([x, y]) => `${X(x).toFixed(1)},${Y(y, axis).toFixed(1)}`).join(' ');
    out.push(
      `<polyline fill="none" stroke="${line.color}" stroke-width="2"${line.dashed ? ' stroke-dasharray="6 3"' : ''} ` +
        `points="${pts}"/>`,
    );
  }
  // The legend, in one row under the x axis's label.
  let lx = m.left;
  const ly = height - 18;
  for (const line of chart.lines) {
    const label = `${line.name}${chart.rightLabel ? ` (${line.axis === 'right' ? 'right' : 'left'} axis)` : ''}`;
    out.push(
      `<line x1="${lx}" x2="${lx + 24}" y1="${ly - 4}" y2="${ly - 4}" stroke="${line.color}" stroke-width="2"` +
        `${line.dashed ? ' stroke-dasharray="6 3"' : ''}/>`,
      `<text x="${lx + 30}" y="${ly}">${esc(label)}</text>`,
    );
    lx += 40 + label.length * 6.5;
  }
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}
