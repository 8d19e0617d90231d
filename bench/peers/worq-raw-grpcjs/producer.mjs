// Child process: submits jobs (see runProducer in ../drivers.mjs).
import { runProducer } from "../drivers.mjs";
import { openProducer } from "./adapter.mjs";

await runProducer(openProducer);
