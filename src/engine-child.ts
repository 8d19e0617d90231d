import type { ServerConfig } from "./config.js";
import { createLogger } from "./log.js";
import { startServer } from "./main.js";
import { tuneHeap } from "./heap-tuning.js";
import { startPartitionedNode } from "./cluster/partitioned-node.js";
import type { MetricsRead } from "./cluster/metrics-merge.js";
import type { JobMeta } from "./model/job.js";
import type { InboxRecord } from "./engine/store.js";
import { decodeInboxRecord, encodeInboxRecord } from "./storage/inbox-codec.js";
import { askOverIpc } from "./ipc-ask.js";
import { coalesced } from "./coalesced-call.js";
import type { SharedSubmitBuckets } from "./transport/auth/shared-submit-rate.js";

/**
 * One engine process of `worq serve --engines N` (src/engine-processes.ts starts it with fork),
 * with the settings the parent passed in WORQ_ENGINE_CHILD (JSON): on LevelDB a whole server
 * on its partition and its own store (src/engines-node.ts); on PostgreSQL a node of the
 * partitioned cluster of its own, sharing the partitions with the others
 * (src/partitioned-engines.ts). It tells the parent its gRPC port over the IPC channel once
 * listening, answers its requests for metrics there, and stops gracefully when told
 * (SIGTERM) or when the parent is gone (the channel closes); SIGHUP re-reads the token file.
 */
const { config } = JSON.parse(process.env.WORQ_ENGINE_CHILD ?? "{}") as { config: ServerConfig };
tuneHeap();
const partitioned = config.cluster?.partitions !== undefined && config.store !== undefined;
const log = createLogger(
  config.logLevel,
  process.stderr,
  partitioned ? { node: config.cluster!.nodeId } : { engine: config.engineSlot?.index },
);
/** How long an engine waits for another engine's metas (asked over the parent) before the read fails and is tried again later. */
const METAS_ANSWER_MS = 5_000;
let metasAsked = 0;
/** On LevelDB each engine's store holds its own partition: the metas of another's jobs are asked of it, over the parent. */
const foreignMetas = async (partition: number, jids: readonly string[]): Promise<(JobMeta | undefined)[]> => {
  const id = ++metasAsked;
  const answer = await askOverIpc(
    process,
    { askMetas: id, partition, jids },
    (message: { metasAnswer?: number; metas?: (JobMeta | null)[]; error?: string }) => (message.metasAnswer === id ? message : undefined),
    METAS_ANSWER_MS,
    `engine ${partition} did not answer within ${METAS_ANSWER_MS} ms`,
  );
  if (answer.error !== undefined) throw new Error(answer.error);
  return (answer.metas ?? []).map((meta) => meta ?? undefined);
};
/** How long an engine waits for the parent to count a caller's submits before the call is refused (UNAVAILABLE). */
const SUBMITS_ANSWER_MS = 2_000;
let submitsAsked = 0;
/** On LevelDB the engines serve the same callers: --submit-rate is counted in the parent, each engine drawing its share. */
const submitBuckets: SharedSubmitBuckets = {
  draw: async (caller, need, most) => {
    const id = ++submitsAsked;
    const answer = await askOverIpc(
      process,
      { drawSubmits: id, caller, need, most },
      (message: { submitsDrawn?: number; granted?: number; retryAfterMs?: number; error?: string }) =>
        message.submitsDrawn === id ? message : undefined,
      SUBMITS_ANSWER_MS,
      `the node did not count the submits within ${SUBMITS_ANSWER_MS} ms`,
    );
    if (answer.error !== undefined) throw new Error(answer.error);
    return { granted: answer.granted ?? 0, retryAfterMs: answer.retryAfterMs ?? 0 };
  },
};
/**
 * Hints of this engine's ends (EngineOptions.onEndsDurable), sent to the parent only while it
 * says another engine's jobs wait for jobs of another engine: it passes them to those
 * engines, which read their waits at once rather than at their next timed read.
 */
const ENDS_HINT_GAP_MS = 5;
let endsHintsWanted = false;
let endsHintsSent = 0;
const sendEndsHint = coalesced(() => {
  if (!process.connected) return;
  process.send!({ endsIn: config.engineSlot?.index });
  endsHintsSent++;
}, ENDS_HINT_GAP_MS);
const endsHints = {
  onEndsDurable: () => {
    if (endsHintsWanted) sendEndsHint();
  },
  onRemoteWaiting: (waiting: boolean) => {
    if (process.connected) process.send!({ remoteWaiting: waiting });
  },
};
/**
 * A batch over several engines: the records of jobs for other engines this engine's commits
 * made go to the parent, which passes each to its engine (and reads of their jobs meanwhile
 * find them there); this engine hears back once one was applied (recordApplied).
 */
const inboxCarrier = {
  onInboxSent: (records: readonly InboxRecord[]) => {
    if (process.connected) process.send!({ inboxRecords: records.map(encodeInboxRecord) });
  },
};
/** The server whose waits a hint reads, once started. */
let hinted: { hintRemoteEnds(): void } | undefined;
// Listened for from the start: the parent says at once whether any engine waits for another's jobs.
process.on("message", (message: { endsHintsWanted?: boolean; endsHint?: number }) => {
  if (message.endsHintsWanted !== undefined) endsHintsWanted = message.endsHintsWanted;
  if (message.endsHint !== undefined) hinted?.hintRemoteEnds();
});
const started = partitioned
  ? startPartitionedNode({ ...config, cluster: { ...config.cluster!, partitions: config.cluster!.partitions! }, store: config.store! }, log)
  : startServer(config, log, undefined, { foreignMetas, ...(config.submitRate && { submitBuckets }), ...endsHints, ...inboxCarrier });
const server = await started.catch((error: unknown) => {
  log.error("engine cannot start", { error: (error as Error).message });
  process.exit(1);
});
/** The figures of each partition this process serves. */
const partitionMetrics = async (): Promise<MetricsRead> =>
  "partitionMetrics" in server
    ? server.partitionMetrics()
    : {
        parts: [{ partition: config.engineSlot?.index ?? 0, text: `${(await server.metricsText()).trimEnd()}\n${endsHintsText()}` }],
        unread: [],
      };
/** The hints of ends this engine sent the parent, beside its server's figures. */
const endsHintsText = () =>
  "# HELP worq_end_hints_sent_total Hints of this engine's ends sent to the other engines (only while one's jobs wait for another's).\n" +
  `# TYPE worq_end_hints_sent_total counter\nworq_end_hints_sent_total ${endsHintsSent}\n`;
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
  partitionMetrics().then(
    (read) => process.send?.({ metricsOf: message.metrics, ...read }),
    (error: Error) => process.send?.({ metricsOf: message.metrics, error: error.message }),
  );
});
// Another engine asks, over the parent, for the stored metas of jobs here that its jobs wait for.
process.on("message", (message: { readMetas?: number; jids?: string[] }) => {
  if (message.readMetas === undefined || !("storedMetas" in server)) return;
  const reply = (answer: { metas?: (JobMeta | null)[]; error?: string }) => process.send?.({ metasRead: message.readMetas, ...answer });
  server.storedMetas(message.jids ?? []).then(
    (metas) => reply({ metas: metas.map((meta) => meta ?? null) }),
    (error: Error) => reply({ error: error.message }),
  );
});
// Another engine's records of jobs of this one's queues, over the parent: stored, then answered applied.
process.on("message", (message: { applyInbox?: string; recordApplied?: string }) => {
  if (!("recordApplied" in server)) return;
  if (message.recordApplied !== undefined) {
    server
      .recordApplied(message.recordApplied)
      .catch((error: Error) => log.warn("forgetting an applied record failed", { error: error.message }));
  }
  if (message.applyInbox === undefined) return;
  const record = decodeInboxRecord(message.applyInbox);
  server.applyInbox(record).then(
    () => process.send?.({ inboxApplied: record.id, from: record.from }),
    // Sent again by its engine a second later.
    (error: Error) => log.warn("applying another engine's record failed", { from: record.from, error: error.message }),
  );
});
hinted = "hintRemoteEnds" in server ? server : undefined;
process.send!({ grpcPort: server.grpcPort, httpPort: server.httpPort, faktoryPort: server.faktoryPort, workqPort: server.workqPort });
