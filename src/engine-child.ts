import type { ServerConfig } from "./config.js";
import { createLogger } from "./log.js";
import { startServer } from "./main.js";
import { tuneHeap } from "./heap-tuning.js";

/**
 * One engine process of `worq serve --engines N`, started by src/engines-node.ts with fork: a
 * whole server on its partition and its own LevelDB store, on ports of its own, with the
 * settings the parent passed in WORQ_ENGINE_CHILD (JSON). It tells the parent its ports over
 * the IPC channel once listening, and stops gracefully when told (SIGTERM) or when the
 * parent is gone (the channel closes); SIGHUP re-reads the token file, as a server does.
 */
const { config } = JSON.parse(process.env.WORQ_ENGINE_CHILD ?? "{}") as { config: ServerConfig };
tuneHeap();
const log = createLogger(config.logLevel, process.stderr, { engine: config.engineSlot?.index });
const server = await startServer(config, log).catch((error: unknown) => {
  log.error("engine cannot start", { error: (error as Error).message });
  process.exit(1);
});
let stopping = false;
const stop = async (): Promise<void> => {
  if (stopping) return;
  stopping = true;
  await server.close();
  process.exit(0);
};
process.on("SIGTERM", () => void stop());
// Ctrl-C reaches every process of the group: the parent decides, and sends SIGTERM.
process.on("SIGINT", () => {});
process.on("disconnect", () => void stop());
process.on("SIGHUP", () => {
  try {
    server.reloadTokens();
  } catch (error) {
    log.error("cannot reload the token file; the old tokens stay in force", { error: (error as Error).message });
  }
});
// The parent's /metrics asks for this engine's figures over the channel (no port, token or TLS between them).
process.on("message", (message: { metrics?: number }) => {
  if (message.metrics === undefined) return;
  void server.metricsText().then((text) => process.send?.({ metricsOf: message.metrics, text }));
});
process.send!({ grpcPort: server.grpcPort, httpPort: server.httpPort });
