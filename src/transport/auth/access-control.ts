import { timingSafeEqual } from "node:crypto";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { toBinary } from "@bufbuild/protobuf";
import { DurationSchema, durationFromMs } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import { ALL_QUEUES, type QueueScope } from "./queue-scope.js";
import { ruleOf, type Role } from "./roles.js";
import { SharedSubmitLimiter, type SharedSubmitBuckets } from "./shared-submit-rate.js";
import { SubmitRateLimiter, type Admission, type SubmitRate } from "./submit-rate.js";
import { hashToken, type TokenEntry } from "./token-file.js";

export interface AccessOptions {
  /** The token file's entries; undefined turns token auth off (every call is allowed). */
  tokens: TokenEntry[] | undefined;
  publicReflection: boolean;
  submitRate: SubmitRate | undefined;
  /** Where the rate is counted when this server is one of several serving the same callers; unset = here alone. */
  sharedBuckets?: SharedSubmitBuckets;
}

/** Who is calling: a token's holder, or everyone when token auth is off. */
export interface Caller {
  name: string;
  role: Role | "anonymous";
  /** The queues the caller may touch. */
  scope: QueueScope;
}

/** Without token auth every caller is one, shares one submit-rate bucket and touches every queue. */
export const ANONYMOUS: Caller = { name: "(anonymous)", role: "anonymous", scope: ALL_QUEUES };

/** The trailer (and HTTP header) that says how long to wait before submitting again. */
export const RETRY_AFTER_MS = "retry-after-ms";

/**
 * The transport's gate both ports share: who is calling (bearer token), may they call
 * this path (role), and may they submit this many jobs now (rate). Failures are ConnectErrors
 * with the gRPC code a client acts on: UNAUTHENTICATED, PERMISSION_DENIED, RESOURCE_EXHAUSTED.
 * The engine never sees tokens.
 */
export class AccessControl {
  private tokens: TokenEntry[] | undefined;
  private readonly limiter: { take(caller: string, jobs: number): Admission | Promise<Admission> } | undefined;

  constructor(private readonly options: AccessOptions) {
    this.tokens = options.tokens;
    const rate = options.submitRate;
    this.limiter = rate && (options.sharedBuckets ? new SharedSubmitLimiter(rate, options.sharedBuckets) : new SubmitRateLimiter(rate));
  }

  get tokenAuth(): boolean {
    return this.tokens !== undefined;
  }

  /** Whether any call can be refused: without tokens and a submit rate, the gate can be left out. */
  get guards(): boolean {
    return this.tokens !== undefined || this.limiter !== undefined;
  }

  /** Swaps in a re-read token file (SIGHUP): how tokens are rotated without a restart. */
  replaceTokens(tokens: TokenEntry[]): void {
    if (this.tokens === undefined) throw new Error("token auth is off (start the server with --auth-tokens)");
    this.tokens = tokens;
  }

  /** Throws UNAUTHENTICATED or PERMISSION_DENIED unless `authorization` may call `path`. */
  authorize(path: string, authorization: string | null | undefined): Caller {
    if (this.tokens === undefined) return ANONYMOUS;
    const rule = ruleOf(path, this.options);
    if (rule.kind === "open") return ANONYMOUS;
    const caller = this.authenticate(authorization);
    if (rule.kind === "roles" && !rule.roles.includes(caller.role as Role)) {
      throw new ConnectError(
        `the ${caller.role} token "${caller.name}" may not call ${path.slice(1)} (needs ${rule.roles.join(" or ")})`,
        Code.PermissionDenied,
      );
    }
    return caller;
  }

  /**
   * Throws RESOURCE_EXHAUSTED, with the wait in a RetryInfo detail and a retry-after-ms trailer,
   * when `caller` is over its submit rate; a promise when the rate is shared with other servers
   * and this one must draw from the shared bucket first.
   */
  admitSubmits(caller: Caller, jobs: number): void | Promise<void> {
    if (!this.limiter || jobs === 0) return;
    const admission = this.limiter.take(caller.name, jobs);
    if (admission instanceof Promise) return admission.then(admitted);
    admitted(admission);
  }

  /** The holder of the bearer token in `authorization`; throws UNAUTHENTICATED for a missing or unknown token. */
  authenticate(authorization: string | null | undefined): Caller {
    if (this.tokens === undefined) return ANONYMOUS;
    const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? "");
    if (!match) {
      throw new ConnectError(
        authorization ? 'the authorization header must be "Bearer <token>"' : 'missing credentials: send "authorization: Bearer <token>"',
        Code.Unauthenticated,
      );
    }
    // Compare hashes, every entry, in constant time: neither the timing of one comparison
    // nor the position of the match tells an attacker anything about a token.
    const presented = hashToken(match[1]!);
    let found: TokenEntry | undefined;
    for (const entry of this.tokens!) {
      if (timingSafeEqual(presented, entry.sha256) && !found) found = entry;
    }
    if (!found) throw new ConnectError("unknown token", Code.Unauthenticated);
    return { name: found.name, role: found.role, scope: found.scope };
  }
}

/** How many jobs a call to `path` submits: SubmitBatch counts its jobs. */
export function jobsSubmittedBy(path: string, message: unknown): number {
  switch (path) {
    case "/worq.v1.ProducerService/Submit":
    case "/worq.v1.ProducerService/Run":
      return 1;
    case "/worq.v1.ProducerService/SubmitBatch":
      return (message as { jobs?: unknown[] } | undefined)?.jobs?.length ?? 0;
    default:
      return 0;
  }
}

/** A google.rpc.RetryInfo detail (encoded by hand: one Duration field, no generated type needed). */
function retryInfo(ms: number): { type: string; value: Uint8Array } {
  const value = new BinaryWriter()
    .tag(1, WireType.LengthDelimited)
    .bytes(toBinary(DurationSchema, durationFromMs(ms)))
    .finish();
  return { type: "google.rpc.RetryInfo", value };
}

function admitted(admission: Admission): void {
  if (admission.allowed) return;
  if (admission.retryAfterMs === 0) throw new ConnectError(admission.reason, Code.ResourceExhausted);
  const error = new ConnectError(`${admission.reason}; retry after ${admission.retryAfterMs} ms`, Code.ResourceExhausted, {
    [RETRY_AFTER_MS]: String(admission.retryAfterMs),
  });
  error.details.push(retryInfo(admission.retryAfterMs));
  throw error;
}
