/** One switch over the three JSON formats, and each format reading what it writes. */
import { describe, expect, it } from "vitest";
import type { SubmitInput } from "../../src/model/job.js";
import { JOB_FORMATS, formatJob, importJob, isJobFormat, submitInputFromFormat } from "../../src/formats/index.js";
import { envelopeOf } from "../../src/formats/envelope.js";
import { sidekiqJsonOf, submitInputFromSidekiqJson } from "../../src/formats/sidekiq-json.js";
import { submitInputFromWorqJson, worqJsonOf } from "../../src/formats/worq-json.js";
import { JID, expectInvalid, viewOf } from "./helpers.js";

const INPUT: SubmitInput = { type: "Mailer", queue: "mail", args: ["a", 1], retry: { maxAttempts: 5 } };

describe("formats: the dispatcher", () => {
  it("knows the three formats", () => {
    expect(JOB_FORMATS).toEqual(["worq", "sidekiq", "envelope"]);
    expect(isJobFormat("sidekiq")).toBe(true);
    expect(isJobFormat("celery")).toBe(false);
  });

  it("formats with the format's own converter", () => {
    const view = viewOf(INPUT);
    expect(formatJob(view, "worq")).toEqual(worqJsonOf(view));
    expect(formatJob(view, "sidekiq")).toEqual(sidekiqJsonOf(view));
    expect(formatJob(view, "envelope")).toEqual(envelopeOf(view));
  });

  it.each(JOB_FORMATS)("%s reads back what it writes (type, args and the jid as clientJid)", (format) => {
    const doc = JSON.parse(JSON.stringify(formatJob(viewOf(INPUT), format)));
    const { input, clientJid } = importJob(doc, format);
    expect(clientJid).toBe(JID);
    expect(input).toMatchObject({ type: "Mailer", args: ["a", 1] });
    expect(submitInputFromFormat(doc, format)).toEqual(input);
    // The formats that carry queue and retry keep them.
    if (format !== "envelope") expect(input).toMatchObject({ queue: "mail", retry: { maxAttempts: 5 } });
  });

  it("errors name the format's own field", () => {
    expectInvalid(() => submitInputFromFormat({ args: [] }, "worq"), "jobtype");
    expectInvalid(() => submitInputFromFormat({ args: [] }, "sidekiq"), "class");
    expectInvalid(() => submitInputFromFormat({ args: [], kwargs: {} }, "envelope"), "job_path");
  });
});

describe("unlimited attempts in the Faktory and Sidekiq shapes", () => {
  it("export as the most retries a job can hold (neither format can say unlimited), which reads back as a valid job", () => {
    const view = viewOf({ type: "T", args: [], retry: { maxAttempts: 0 } });
    expect(view.meta.retry.maxAttempts).toBe(0);
    const faktory = worqJsonOf(view);
    const sidekiq = sidekiqJsonOf(view);
    expect([faktory.retry, sidekiq.retry]).toEqual([999, 999]);
    expect(submitInputFromWorqJson(faktory as never).retry).toEqual({ maxAttempts: 1000 });
    expect(submitInputFromSidekiqJson(sidekiq as never).retry?.maxAttempts).toBe(1000);
  });
});
