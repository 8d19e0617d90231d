import { toJson } from "@bufbuild/protobuf";
import { ListValueSchema, timestampMs, type Duration, type ListValue, type Timestamp } from "@bufbuild/protobuf/wkt";

export function count(value: bigint | number | undefined): string {
  return (value ?? 0).toLocaleString("en-US");
}

export function msOf(duration: Duration | undefined): number {
  return duration ? Number(duration.seconds) * 1000 + Math.round(duration.nanos / 1e6) : 0;
}

/** A span as "850 ms", "12 s", "4 min 3 s", "2 h 5 min", "3 d 4 h". */
export function span(ms: number): string {
  if (ms < 1000) return `${Math.max(0, Math.round(ms))} ms`;
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${s % 60} s`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h} h ${m % 60} min`;
  return `${Math.floor(h / 24)} d ${h % 24} h`;
}

export function whenMs(timestamp: Timestamp | undefined): number | undefined {
  return timestamp ? timestampMs(timestamp) : undefined;
}

/** An instant as local date-time plus how long ago or ahead it is. */
export function when(timestamp: Timestamp | undefined): string {
  const ms = whenMs(timestamp);
  if (ms === undefined) return "";
  return `${new Date(ms).toLocaleString("sv-SE")} (${relative(ms)})`;
}

export function relative(ms: number): string {
  const delta = ms - Date.now();
  return delta >= 0 ? `in ${span(delta)}` : `${span(-delta)} ago`;
}

export function shortJid(jid: string): string {
  return jid.slice(0, 8);
}

export function json(value: unknown): string {
  return JSON.stringify(value, null, 2);
}

export function listJson(list: ListValue | undefined): unknown {
  return list ? toJson(ListValueSchema, list) : undefined;
}

/** Bytes as UTF-8 text, or undefined when they are not valid UTF-8. */
export function utf8(bytes: Uint8Array): string | undefined {
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    return undefined;
  }
}

/** A hex dump: offset, 16 bytes in hex, and their printable ASCII. */
export function hexDump(bytes: Uint8Array): string {
  const lines: string[] = [];
  for (let offset = 0; offset < bytes.length; offset += 16) {
    const row = bytes.subarray(offset, offset + 16);
    const hex = [...row].map((b) => b.toString(16).padStart(2, "0")).join(" ");
    const ascii = [...row].map((b) => (b >= 0x20 && b < 0x7f ? String.fromCharCode(b) : ".")).join("");
    lines.push(`${offset.toString(16).padStart(8, "0")}  ${hex.padEnd(47)}  ${ascii}`);
  }
  return lines.join("\n");
}

export function bytesSize(n: number | bigint): string {
  const value = Number(n);
  if (value < 1024) return `${value} B`;
  if (value < 1024 * 1024) return `${(value / 1024).toFixed(1)} KiB`;
  if (value < 1024 ** 3) return `${(value / 1024 / 1024).toFixed(1)} MiB`;
  return `${(value / 1024 ** 3).toFixed(2)} GiB`;
}

export function truncate(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}
