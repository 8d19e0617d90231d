// Child process: works jobs with a no-op handler (see runWorker in ../drivers.mjs).
import { runWorker } from "../drivers.mjs";
import { openWorker } from "./adapter.mjs";

await runWorker(openWorker);
