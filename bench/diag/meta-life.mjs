#!/usr/bin/env node
// Diagnostic, not part of `npm run bench`: CPU of one job's meta records on the server's
// hot path, in-process: build at submit, then lease and ack transitions, with the three
// binary encodes the LevelDB store makes. `node bench/diag/meta-life.mjs` (after npm run build)
import { randomUUID } from "node:crypto";
import { buildNewJob } from "../../dist/src/engine/submit-validation.js";
import { transition } from "../../dist/src/engine/state-machine.js";
import { encodeMeta } from "../../dist/src/storage/level/codec.js";

const ctx = { nowMs: Date.now(), random: Math.random, nextReadySeq: () => 1 };
const jids = Array.from({ length: 1000 }, () => randomUUID());
let bytes = 0;
const lives = () => {
  for (const jid of jids) {
    const { meta } = buildNewJob({ type: "bench", queue: "bench", args: [1] }, "job", { jid, nowMs: ctx.nowMs }, 1 << 20);
    const ready = { ...meta, readySeq: 5 };
    bytes += encodeMeta(ready).length;
    const leased = transition(ready, { kind: "lease", leaseId: jid, workerId: "worker-1" }, ctx);
    bytes += encodeMeta(leased).length;
    bytes += encodeMeta(transition(leased, { kind: "ack", leaseId: jid }, ctx)).length;
  }
};
for (let i = 0; i < 50; i++) lives(); // warm-up
for (let round = 0; round < 4; round++) {
  const started = process.hrtime.bigint();
  for (let i = 0; i < 100; i++) lives();
  console.log(
    `${(Number(process.hrtime.bigint() - started) / 1e3 / (100 * jids.length)).toFixed(2)} µs per job (build, lease, ack, 3 encodes)`,
  );
}
if (bytes === 0) throw new Error("nothing encoded");
