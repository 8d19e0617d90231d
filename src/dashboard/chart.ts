/** A small line chart drawn as inline SVG (no library): time on x, one or more series on y. */
export interface Series {
  name: string;
  /** [time ms, value] in time order. */
  points: [number, number][];
}

const SVG = "http://www.w3.org/2000/svg";
const W = 600;
const H = 180;
const PAD = { left: 44, right: 8, top: 8, bottom: 20 };
const COLORS = ["#3b6fd8", "#d0463b", "#2f9e63", "#c58a1e", "#8a5cd0", "#2aa1b3"];

function svg<K extends keyof SVGElementTagNameMap>(tag: K, attrs: Record<string, string | number>, text?: string): SVGElementTagNameMap[K] {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, String(value));
  if (text !== undefined) node.textContent = text;
  return node;
}

function colorOf(index: number): string {
  return COLORS[index % COLORS.length]!;
}

function niceMax(value: number): number {
  if (value <= 0) return 1;
  const magnitude = 10 ** Math.floor(Math.log10(value));
  return [1, 2, 5, 10].map((m) => m * magnitude).find((m) => m >= value)!;
}

/** The chart over [fromMs, toMs]; `unit` labels the y axis ticks (e.g. "/s"). */
export function lineChart(series: Series[], fromMs: number, toMs: number, label: string): SVGSVGElement {
  const root = svg("svg", { class: "chart", viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": label });
  const max = niceMax(Math.max(0, ...series.flatMap((s) => s.points.map(([, v]) => v))));
  const x = (t: number) => PAD.left + ((t - fromMs) / Math.max(1, toMs - fromMs)) * (W - PAD.left - PAD.right);
  const y = (v: number) => H - PAD.bottom - (v / max) * (H - PAD.top - PAD.bottom);
  for (const fraction of [0, 0.5, 1]) {
    const value = max * fraction;
    root.append(svg("line", { class: "axis", x1: PAD.left, x2: W - PAD.right, y1: y(value), y2: y(value) }));
    root.append(
      svg(
        "text",
        { x: PAD.left - 4, y: y(value) + 3, "text-anchor": "end" },
        value >= 10 ? value.toFixed(0) : value.toFixed(value ? 1 : 0),
      ),
    );
  }
  const ago = (ms: number) => (toMs - fromMs >= 120_000 ? `-${Math.round(ms / 60_000)} min` : `-${Math.round(ms / 1000)} s`);
  for (const fraction of [0, 0.5, 1]) {
    const t = fromMs + (toMs - fromMs) * fraction;
    const text = fraction === 1 ? "now" : ago((toMs - fromMs) * (1 - fraction));
    root.append(svg("text", { x: x(t), y: H - 5, "text-anchor": fraction === 0 ? "start" : fraction === 1 ? "end" : "middle" }, text));
  }
  series.forEach((s, i) => {
    if (s.points.length === 0) return;
    const points = s.points.map(([t, v]) => `${x(t).toFixed(1)},${y(v).toFixed(1)}`).join(" ");
    root.append(svg("polyline", { points, fill: "none", stroke: colorOf(i), "stroke-width": 1.8, "vector-effect": "non-scaling-stroke" }));
  });
  return root;
}

export function legend(series: Series[]): HTMLElement {
  const box = document.createElement("div");
  box.className = "legend";
  series.forEach((s, i) => {
    const item = document.createElement("span");
    const swatch = svg("svg", { class: "swatch", viewBox: "0 0 10 10", width: 10, height: 10 });
    swatch.append(svg("rect", { width: 10, height: 10, rx: 2, fill: colorOf(i) }));
    item.append(swatch, document.createTextNode(s.name));
    box.append(item);
  });
  return box;
}
