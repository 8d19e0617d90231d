/** A markdown table; `rows` are arrays of cells (strings). */
export function markdownTable(headers, rows) {
  const line = (cells) => `| ${cells.join(" | ")} |`;
  return [line(headers), line(headers.map(() => "---")), ...rows.map(line)].join("\n");
}

/** A number for people: thousands separated, `digits` significant below 100. */
export function num(value, { digits = 3 } = {}) {
  if (value === undefined || value === null || !Number.isFinite(value)) return "—";
  const abs = Math.abs(value);
  if (abs >= 100) return Math.round(value).toLocaleString("en-US");
  if (abs === 0) return "0";
  return Number(value.toPrecision(digits)).toString();
}

/** "**median** (min–max)" for a figure over several runs, just the value for one run, "—" for none. */
export function fig(figure, options) {
  if (!figure || !Number.isFinite(figure.median)) return "—";
  if (figure.runs.length <= 1) return `**${num(figure.median, options)}**`;
  return `**${num(figure.median, options)}** (${num(figure.min, options)}–${num(figure.max, options)})`;
}

/** Ratio of two figures' medians as "2.31×", or "—" when either is missing. */
export function ratio(a, b) {
  const value = a?.median / b?.median;
  return Number.isFinite(value) ? `${value >= 10 ? value.toFixed(1) : value.toFixed(2)}×` : "—";
}

export function ratioValue(a, b) {
  const value = a?.median / b?.median;
  return Number.isFinite(value) ? value : NaN;
}

/** Rows for peers that could not run: their label, then "missing" in every cell. */
export function missingRows(missing, labelOf, width) {
  return Object.entries(missing ?? {}).map(([id, reason]) => [labelOf(id), ...Array.from({ length: width - 1 }, () => "missing")]);
}
