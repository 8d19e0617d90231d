// Child process for W5: jobs scheduled across 2 s, worker in the same process (see runScheduled in ../drivers.mjs).
import { runScheduled } from "../drivers.mjs";
import { openProducer, openWorker } from "./adapter.mjs";

await runScheduled(openProducer, openWorker);
