/**
 * Who may call what. A token has one role; admin may call everything. The table is keyed by
 * the gRPC path (`/package.Service/Method`), which the Connect protocol on the HTTP port
 * shares, so one table serves both ports.
 */
export const ROLES = ["producer", "worker", "admin"] as const;
export type Role = (typeof ROLES)[number];

export function isRole(text: string): text is Role {
  return (ROLES as readonly string[]).includes(text);
}

/**
 * Producers create jobs and follow the jobs they created: submit, run, wait for a result,
 * watch a job, read a job (GetJob lives on AdminService but is how a producer reads its job) and cancel
 * one (undoing a submit is part of submitting), and collect the children of a job. Workers run
 * jobs, and collect the children a running job spawned. Everything else (listing,
 * deleting, retrying, purging, pausing, controlling workers, server info) is admin only.
 */
const NON_ADMIN_GRANTS: Record<Exclude<Role, "admin">, string[]> = {
  producer: [
    "/worq.v1.ProducerService/Submit",
    "/worq.v1.ProducerService/SubmitBatch",
    "/worq.v1.ProducerService/Run",
    "/worq.v1.ProducerService/GetResult",
    "/worq.v1.ProducerService/Cancel",
    "/worq.v1.ProducerService/CollectChildren",
    "/worq.v1.ProducerService/WatchJob",
    "/worq.v1.ProducerService/CreateBatch",
    "/worq.v1.ProducerService/SealBatch",
    "/worq.v1.ProducerService/GetBatch",
    "/worq.v1.AdminService/GetJob",
  ],
  worker: [
    "/worq.v1.WorkerService/Lease",
    "/worq.v1.WorkerService/Ack",
    "/worq.v1.WorkerService/Fail",
    "/worq.v1.WorkerService/Renew",
    "/worq.v1.WorkerService/Report",
    // A running parent gathers the children it spawned (FAN_OUT).
    "/worq.v1.ProducerService/CollectChildren",
    "/worq.v1.WorkerService/Checkpoint",
    "/worq.v1.WorkerService/ReportProgress",
    "/worq.v1.WorkerService/SetLeaseCredits",
  ],
};

const ROLES_OF_PATH = new Map<string, Role[]>();
for (const [role, paths] of Object.entries(NON_ADMIN_GRANTS) as [Role, string[]][]) {
  for (const path of paths) ROLES_OF_PATH.set(path, [...(ROLES_OF_PATH.get(path) ?? []), role]);
}

/** How a path is guarded: open to anyone, open to any valid token, or limited to roles. */
export type PathRule = { kind: "open" } | { kind: "any-token" } | { kind: "roles"; roles: Role[] };

export interface PathRuleOptions {
  /** gRPC reflection without a token (default: reflection needs a valid token of any role). */
  publicReflection: boolean;
}

export function ruleOf(path: string, options: PathRuleOptions): PathRule {
  // Load balancers and orchestrators probe health without credentials.
  if (path.startsWith("/grpc.health.v1.Health/")) return { kind: "open" };
  if (/^\/grpc\.reflection\.v1(alpha)?\.ServerReflection\//.test(path)) {
    return options.publicReflection ? { kind: "open" } : { kind: "any-token" };
  }
  return { kind: "roles", roles: [...(ROLES_OF_PATH.get(path) ?? []), "admin"] };
}
