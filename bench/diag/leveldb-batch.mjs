#!/usr/bin/env node
// Diagnostic, not part of `npm run bench`: main-thread cost per key operation of the two
// ways classic-level takes a batch, as the LevelDB store uses them (string keys, byte
// values, ~190-byte metas, one op in five a delete). `node bench/diag/leveldb-batch.mjs`
//   array:   db._batch(ops)          (N-API reads each op's type, key and value back from JS)
//   chained: db._chainedBatch()._put/_del per op, then _write  (what LevelStore does)
import { mkdtempSync } from "node:fs";
import { randomUUID } from "node:crypto";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Level } from "level";
import { cleanupAll, trackDir } from "../lib/cleanup.mjs";

const GROUPS = 400;
const OPS = 150;
try {
  const db = new Level(join(trackDir(mkdtempSync(join(tmpdir(), "worq-leveldb-batch-"))), "db"), {
    keyEncoding: "utf8",
    valueEncoding: "view",
  });
  await db.open();
  const value = Buffer.alloc(190, 7);
  const groups = Array.from({ length: GROUPS }, () =>
    Array.from({ length: OPS }, (_, i) => ({ type: i % 5 === 4 ? "del" : "put", key: `j/${randomUUID()}`, value })),
  );
  const write = {
    array: (ops) => db._batch(ops, { sync: false }),
    chained: (ops) => {
      const batch = db._chainedBatch();
      for (const op of ops) op.type === "put" ? batch._put(op.key, op.value) : batch._del(op.key);
      const written = batch._write({ sync: false });
      db.detachResource(batch);
      return written;
    },
  };
  for (const mode of ["array", "chained", "array", "chained", "array", "chained"]) {
    let mainNs = 0;
    for (const ops of groups) {
      const started = process.hrtime.bigint();
      const written = write[mode](ops);
      mainNs += Number(process.hrtime.bigint() - started);
      await written;
    }
    console.log(`${mode.padEnd(8)} ${(mainNs / (GROUPS * OPS)).toFixed(0)} ns of main thread per op`);
  }
  await db.close();
} finally {
  await cleanupAll();
}
