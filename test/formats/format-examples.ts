/**
 * Each job format's own example jobs, verbatim but for JSON's rules (comments, trailing
 * commas and "..." removed): the format tests read them, unit and over the HTTP door.
 */
import type { JsonObject } from "../../src/model/job.js";
import type { Envelope } from "../../src/formats/envelope.js";

/** Faktory's example payload, its `#` comments and trailing commas removed. */
export const SEED_000_EXAMPLE = JSON.parse(`{
  "jid": "some_string",
  "jobtype": "SomeWorker",
  "args": [1,2,3],
  "queue": "default",
  "created_at": "2006-01-02T15:04:05.001000Z",
  "enqueued_at": "2006-01-02T15:04:05.001001Z",
  "reserve_for": 30,
  "retry": 25,
  "backtrace": 50,
  "failure": {
    "failed_at": "2006-01-02T15:04:05.001001Z",
    "retry_count": 7,
    "message": "No such thing",
    "errtype": "ArgumentError",
    "backtrace": [
      "lib/something.rb:123",
      "myapp.rb:15"
    ]
  },
  "custom": {
    "locale": "EN_us",
    "tz": "US/Chicago",
    "account_id": 123456789
  }
}`) as JsonObject;

/** "Job": the bare minimum (its `//` comments removed). */
export const SEED_001_JOB = JSON.parse(`{
  "class": "SomeWorker",
  "jid": "b4a577edbccf1d805744efa9",
  "args": [1, "arg", true],
  "created_at": 1234567890,
  "enqueued_at": 1234567890
}`) as JsonObject;

/** "ActiveJob Middleware Format" (its `//` comments removed). */
export const SEED_001_ACTIVE_JOB = JSON.parse(`{
  "class": "ActiveJob::QueueAdapters::SidekiqAdapter::JobWrapper",
  "wrapped": "SomeWorker",
  "queue": "default",
  "args":[
    {
      "job_class": "SomeWorker",
      "job_id": "b4a577edbccf1d805744efa9",
      "provider_job_id": null,
      "queue_name": "default",
      "priority": null,
      "arguments": ["some",["argument","value"]],
      "executions": 0,
      "locale": "en",
      "attempt_number": 1
    }
  ],
  "retry": true,
  "wait": "0.1",
  "jid": "d774900367dc8b2962b2479c",
  "created_at": 1234567890,
  "locale": "en",
  "enqueued_at": 1234567890,
  "error_message": null,
  "error_class": null,
  "failed_at": null,
  "retry_count": 0,
  "retried_at": null
}`) as JsonObject;

/** "Worker Options". */
export const SEED_001_WORKER_OPTIONS = JSON.parse(`{ "queue": "default", "retry": true }`) as JsonObject;

/** "Scheduled Jobs". */
export const SEED_001_SCHEDULED = JSON.parse(`{ "at": 1234567890.123 }`) as JsonObject;

/** "Retries" (its `//` comments and the "..." of the backtrace removed). */
export const SEED_001_RETRIES = JSON.parse(`{
  "retry_count": 2,
  "error_message": "wrong number of arguments (2 for 3)",
  "error_class": "ArgumentError",
  "error_backtrace": ["line 0", "line 1"],
  "failed_at": 1234567890,
  "retried_at": 1234567890
}`) as JsonObject;

const base = `"job_id": "job-123",
  "job_path": "backend.workers.tasks.worker_heartbeat",
  "args": [],
  "kwargs": {"timestamp": 1672531200},`;

/** The envelope's four lifecycle examples, verbatim. */
export const SEED_002_EXAMPLES: Record<Envelope["state"], Envelope> = {
  enqueued: JSON.parse(`{ ${base} "state": "enqueued", "ts_enqueued": 1672531200 }`),
  running: JSON.parse(`{ ${base} "state": "running", "ts_enqueued": 1672531200, "ts_started": 1672531201 }`),
  done: JSON.parse(`{ ${base} "state": "done", "ts_enqueued": 1672531200, "ts_started": 1672531201, "ts_finished": 1672531205 }`),
  error: JSON.parse(
    `{ ${base} "state": "error", "ts_enqueued": 1672531200, "ts_started": 1672531201, "ts_finished": 1672531202, "error": "Timeout talking to worker" }`,
  ),
};
