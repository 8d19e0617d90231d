import { readFileSync } from "node:fs";
import { createServer } from "node:net";

/**
 * A TCP port free on 127.0.0.1 right now, for a server that must keep its port across
 * restarts. Picked below the kernel's ephemeral range: a port the kernel handed out for
 * `listen(0)` and took back could be handed straight to another test's server or client
 * (in CI, a server started on such a port once failed with EADDRINUSE).
 */
export async function freePort(): Promise<number> {
  const [low, high] = ephemeralRange();
  const first = Math.max(1024, low - 16_384);
  const span = low > 4096 ? low - first : 0; // 0: no range known, let the kernel choose
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = span > 0 ? first + Math.floor(Math.random() * span) : 0;
    const taken = await listenOnce(port);
    if (taken !== undefined) return taken;
  }
  throw new Error(`no free port below ${low} (ephemeral range ${low}-${high})`);
}

function ephemeralRange(): [number, number] {
  try {
    const [low, high] = readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/).map(Number);
    if (Number.isInteger(low) && Number.isInteger(high)) return [low!, high!];
  } catch {
    // Not Linux: the kernel's choice below.
  }
  return [0, 0];
}

/** The port bound (then released) on 127.0.0.1, or undefined when it is in use. */
async function listenOnce(port: number): Promise<number | undefined> {
  const server = createServer();
  const bound = await new Promise<boolean>((resolve) => {
    server.once("error", () => resolve(false));
    server.listen(port, "127.0.0.1", () => resolve(true));
  });
  if (!bound) return undefined;
  const { port: taken } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return taken;
}
