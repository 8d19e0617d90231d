// Child process for W2-style pickup latency: producer and worker in one process (see runLatency in ../drivers.mjs).
import { runLatency } from "../drivers.mjs";
import { openProducer, openWorker } from "./adapter.mjs";

await runLatency(openProducer, openWorker);
