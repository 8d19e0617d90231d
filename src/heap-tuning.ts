import { setFlagsFromString } from "node:v8";

/** V8 settings for a server process (set before it allocates anything; read at each GC). */
export function tuneHeap(): void {
  // A submit's inputs, metas and bodies all live until its commit, so V8 sees each of their
  // allocation sites survive a young-generation GC and starts allocating them in the old
  // generation, where they then die and leave it fragmented: with a large backlog most of the
  // old space kept nothing live (bench/diag/engine-memory.mjs --leveldb; docs/performance.md).
  setFlagsFromString("--no-allocation-site-pretenuring");
  // After a burst (a large preload) V8 let the old generation grow to several times what was
  // live, and the Buffers of that garbage kept malloc's heap large until the next full GC,
  // which V8's memory reducer runs only once the server idles. Growing it by at most 2× what
  // a full GC left live keeps the server's memory near what is live, with no measurable cost
  // in W1 end to end (bench/diag/w4-memory.mjs, e2e.mjs; docs/performance.md).
  // An operator's own --heap-growing-percent (node flag or NODE_OPTIONS) wins.
  if (!`${process.execArgv.join(" ")} ${process.env.NODE_OPTIONS ?? ""}`.includes("--heap-growing-percent")) {
    setFlagsFromString("--heap-growing-percent=100");
  }
}
