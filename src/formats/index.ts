/**
 * The job's JSON formats behind one switch, for the CLI and HTTP import/export: "worq"
 * (Faktory-style), "sidekiq" (Sidekiq's job hash) and "envelope" (the worker job envelope).
 * What each promises: docs/job-formats.md. All pure.
 */
import type { JobView, SubmitInput } from "../model/job.js";
import { envelopeOf, importEnvelope, type Envelope } from "./envelope.js";
import type { ImportedJob, ImportOptions } from "./json-input.js";
import { importSidekiqJson, sidekiqJsonOf, type SidekiqJson } from "./sidekiq-json.js";
import { importWorqJson, worqJsonOf, type WorqJson } from "./worq-json.js";

export type { Envelope } from "./envelope.js";
export type { ImportedJob, ImportOptions } from "./json-input.js";
export type { SidekiqJson } from "./sidekiq-json.js";
export type { WorqJson } from "./worq-json.js";

export type JobFormat = "worq" | "sidekiq" | "envelope";
export const JOB_FORMATS: readonly JobFormat[] = ["worq", "sidekiq", "envelope"];

export function isJobFormat(name: string): name is JobFormat {
  return (JOB_FORMATS as readonly string[]).includes(name);
}

/** The job in the given format. */
export function formatJob(view: JobView, format: "worq"): WorqJson;
export function formatJob(view: JobView, format: "sidekiq"): SidekiqJson;
export function formatJob(view: JobView, format: "envelope"): Envelope;
export function formatJob(view: JobView, format: JobFormat): WorqJson | SidekiqJson | Envelope;
export function formatJob(view: JobView, format: JobFormat): WorqJson | SidekiqJson | Envelope {
  switch (format) {
    case "worq":
      return worqJsonOf(view);
    case "sidekiq":
      return sidekiqJsonOf(view);
    case "envelope":
      return envelopeOf(view);
  }
}

/**
 * Reads a parsed JSON document of the given format for submission, with the document's own
 * job id (never used as the jid) as clientJid, the job's past with `options.history`, and
 * the keys not kept. Throws WORQ_INVALID_ARGUMENT naming the field.
 */
export function importJob(json: unknown, format: JobFormat, options: ImportOptions = {}): ImportedJob {
  switch (format) {
    case "worq":
      return importWorqJson(json, options);
    case "sidekiq":
      return importSidekiqJson(json, options);
    case "envelope":
      return importEnvelope(json, options);
  }
}

/** importJob without the client id. */
export function submitInputFromFormat(json: unknown, format: JobFormat): SubmitInput {
  return importJob(json, format).input;
}

export { workqJobOf, workqJobText } from "./workq.js";
