/** How commands write: aligned tables and key/value blocks for people, one JSON document for scripts. */

/** Writes `text` and a newline to stdout. */
export function print(text = ""): void {
  process.stdout.write(`${text}\n`);
}

/** Writes one JSON document (pretty, so it is readable and still one value for `jq`). */
export function printJson(value: unknown): void {
  print(JSON.stringify(value, null, 2));
}

/** Columns padded to their widest cell; the last column is not padded. */
export function table(headers: string[], rows: string[][]): string {
  const widths = headers.map((header, i) => Math.max(header.length, ...rows.map((row) => (row[i] ?? "").length)));
  const line = (cells: string[]) =>
    cells
      .map((cell, i) => (i === cells.length - 1 ? cell : cell.padEnd(widths[i]!)))
      .join("  ")
      .trimEnd();
  return [line(headers), ...rows.map(line)].join("\n");
}

/** `label  value` lines with the labels aligned; rows whose value is undefined are left out. */
export function keyValues(rows: [string, string | undefined][]): string {
  const shown = rows.filter((row): row is [string, string] => row[1] !== undefined);
  const width = Math.max(0, ...shown.map(([label]) => label.length));
  return shown.map(([label, value]) => `${label.padEnd(width)}  ${value}`.trimEnd()).join("\n");
}

/** "2030-01-02 15:04:05Z (3m ago)". */
export function timeWithAge(ms: number, nowMs = Date.now()): string {
  return `${new Date(ms)
    .toISOString()
    .replace("T", " ")
    .replace(/\.\d+Z$/, "Z")} (${relative(ms, nowMs)})`;
}

/** "3m ago" or "in 5s". */
export function relative(ms: number, nowMs = Date.now()): string {
  const delta = ms - nowMs;
  const text = humanDuration(Math.abs(delta));
  if (Math.abs(delta) < 1000) return "now";
  return delta < 0 ? `${text} ago` : `in ${text}`;
}

/** 1500 -> "1.5s", 90000 -> "1m30s", 90061000 -> "1d1h". */
export function humanDuration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)}ms`;
  if (ms < 60_000) return `${Number((ms / 1000).toFixed(1))}s`;
  const units: [string, number][] = [
    ["d", 86_400_000],
    ["h", 3_600_000],
    ["m", 60_000],
    ["s", 1000],
  ];
  const parts: string[] = [];
  let rest = Math.floor(ms / 1000) * 1000;
  for (const [unit, size] of units) {
    if (rest >= size) {
      parts.push(`${Math.floor(rest / size)}${unit}`);
      rest %= size;
    }
    if (parts.length === 2) break;
  }
  return parts.join("");
}

/** "0 bytes", "1 byte", "12.3 KiB". */
export function byteSize(bytes: number): string {
  if (bytes === 1) return "1 byte";
  if (bytes < 1024) return `${bytes} bytes`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}

/** Bytes as text when they are printable UTF-8, else as base64 (marked so). */
export function bytesAsText(bytes: Uint8Array): string {
  try {
    const text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
    // eslint-disable-next-line no-control-regex
    if (!/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/.test(text)) return text;
  } catch {
    // not UTF-8: fall through
  }
  return `base64:${Buffer.from(bytes).toString("base64")}`;
}
