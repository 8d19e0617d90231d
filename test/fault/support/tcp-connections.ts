import { readFileSync } from "node:fs";

/**
 * Established TCP connections whose local port is one of `ports`, as the kernel sees them
 * (/proc/net/tcp{,6}): the server-side ends of open client connections, to compare with
 * what the server reports (a session it still counts after the kernel dropped it is a leak).
 */
export function establishedOnPorts(ports: number[]): number {
  const wanted = new Set(ports.map((port) => port.toString(16).toUpperCase().padStart(4, "0")));
  let count = 0;
  for (const table of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    let text = "";
    try {
      text = readFileSync(table, "utf8");
    } catch {
      continue;
    }
    for (const line of text.split("\n").slice(1)) {
      const fields = line.trim().split(/\s+/);
      if (fields.length < 4) continue;
      const localPort = fields[1]!.split(":")[1]!;
      if (fields[3] === "01" && wanted.has(localPort)) count++; // 01 = ESTABLISHED
    }
  }
  return count;
}
