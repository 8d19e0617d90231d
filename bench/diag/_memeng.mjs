import { Engine } from "../../dist/src/engine/engine.js";
import { MemoryStore } from "../../dist/src/storage/memory/memory-store.js";
import { systemClock } from "../../dist/src/engine/clock.js";
const N = 100000;
const store = new MemoryStore();
const engine = new Engine({ store, clock: systemClock });
await engine.open();
const mem = () => { global.gc(); global.gc(); return process.memoryUsage().heapUsed; };
const obj = { user: 12345, action: "send-welcome-email", to: "someone@example.com", locale: "en-GB", attempt: 0 };
// keep store data out of the measure: count it separately
const before = mem();
for (let i = 0; i < N; i += 500) {
  await engine.submit(Array.from({ length: 500 }, () => ({ type: "bench" + "", queue: ["sc", "ale"].join(""), args: [structuredClone(obj)] })), (i) => `jobs[${i}]`);
}
const after = mem();
// drop the store's copies to see the engine's share
const storeBytes = (() => { const d = store.data; return d; })();
console.log("heap per job (engine + memory store)", ((after - before) / N).toFixed(0));
for (const k of Object.keys(store.data)) { const v = store.data[k]; if (v && typeof v.clear === "function") v.clear(); }
const after2 = mem();
console.log("heap per job (engine only)", ((after2 - before) / N).toFixed(0));
