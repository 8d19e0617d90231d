import { WorqError } from "../model/errors.js";

/**
 * The error a request gets once a storage write failed: UNAVAILABLE (retry later: the server
 * probes its storage and resumes by itself) with the store's own reason, e.g. "No space left
 * on device" or "Read-only file system", so that whoever sees it knows what to fix.
 */
export function storageFailure(cause: unknown): WorqError {
  const reason = cause instanceof Error ? cause.message : String(cause);
  return new WorqError(
    "WORQ_UNAVAILABLE",
    `storage is failing (${reason}); the server refuses work until a probe write succeeds, retry later`,
  );
}
