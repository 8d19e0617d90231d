/**
 * Shared fixtures of the format tests: build a JobView from a SubmitInput the way the
 * engine does (buildNewJob, fixed jid and clock), then let a test move it along its life.
 */
import { expect } from "vitest";
import { WorqError } from "../../src/model/errors.js";
import type { Failure, JobMeta, JobView, SubmitInput } from "../../src/model/job.js";
import { LIMITS } from "../../src/model/limits.js";
import { buildNewJob } from "../../src/engine/submit-validation.js";

/** The server-assigned id every test job gets. */
export const JID = "0b6f3f0e-8a4e-4c1a-9d55-2f5b8d1e7c3a";
/** 2026-11-22T03:04:05.123Z */
export const NOW = Date.UTC(2026, 10, 22, 3, 4, 5, 123);

/** The job the engine would create from `input` at `nowMs`, with `meta` fields then overridden. */
export function viewOf(input: SubmitInput, meta: Partial<JobMeta> = {}, nowMs = NOW): JobView {
  const job = buildNewJob(input, "job", { jid: JID, nowMs }, LIMITS.defaultMaxJobBytes);
  return { meta: { ...job.meta, ...meta }, body: job.body };
}

/** A failure record as the engine keeps it. */
export function failure(fields: Partial<Failure> = {}): Failure {
  return {
    failedAtMs: NOW,
    retriedAtMs: NOW,
    retryCount: 1,
    message: "boom",
    errtype: "Error",
    backtrace: [],
    category: "TEMPORARY",
    ...fields,
  };
}

/** Expects `fn` to throw WORQ_INVALID_ARGUMENT naming `field` (in `.field` and the message). */
export function expectInvalid(fn: () => unknown, field: string): void {
  let caught: unknown;
  try {
    fn();
  } catch (error) {
    caught = error;
  }
  expect(caught).toBeInstanceOf(WorqError);
  const error = caught as WorqError;
  expect(error.code).toBe("WORQ_INVALID_ARGUMENT");
  expect(error.field).toBe(field);
  expect(error.message.startsWith(`${field}: `)).toBe(true);
}
