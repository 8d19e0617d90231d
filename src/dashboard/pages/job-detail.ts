import { DependencyType, FailureCategory, JobState, Priority, type Job } from "@worq/client/gen/worq/v1/job_pb.js";
import { admin, producer } from "../api.js";
import { button, el, link, table, type Child } from "../dom.js";
import { bytesSize, hexDump, json, listJson, msOf, span, utf8, when, whenMs } from "../format.js";
import { notify, region, type PageFactory } from "../page.js";
import { isRetryable, isUnfinished, isWaitingForTime, stateBadge } from "../states.js";
import { field } from "./overview.js";
import { showError } from "./queues.js";

/** Shown before "Show all": large payloads and documents are cut here. */
const PREVIEW_BYTES = 4096;
const PREVIEW_CHARS = 8192;

/** A block of text cut at `max` characters, with a button that shows it whole. */
function preview(text: string, name: string, max = PREVIEW_CHARS): HTMLElement {
  const pre = el("pre", { data: { block: name } }, text.length > max ? text.slice(0, max) : text);
  if (text.length <= max) return pre;
  const more = button(`Show all (${text.length.toLocaleString("en-US")} characters)`, () => {
    pre.textContent = text;
    more.remove();
  });
  return el("div", {}, pre, el("div", { class: "note" }, `Truncated at ${max.toLocaleString("en-US")} characters. `, more));
}

/** Bytes as text (when UTF-8) or a hex dump, switchable, the first PREVIEW_BYTES until asked for all. */
function bytesView(bytes: Uint8Array, name: string, state: { hex?: boolean; all?: boolean }, rerender: () => void): HTMLElement {
  if (bytes.length === 0) return el("div", { class: "note" }, "(empty)");
  const text = utf8(bytes);
  const hex = state.hex || text === undefined;
  const shown = state.all ? bytes : bytes.subarray(0, PREVIEW_BYTES);
  const body = hex ? hexDump(shown) : (utf8(shown) ?? new TextDecoder().decode(shown));
  const controls: Child[] = [`${bytesSize(bytes.length)}${text === undefined ? ", not UTF-8" : ""}. `];
  if (text !== undefined) controls.push(button(hex ? "As text" : "As hex", () => ((state.hex = !hex), rerender())));
  if (bytes.length > PREVIEW_BYTES && !state.all) {
    controls.push(
      " ",
      button(`Show all ${bytesSize(bytes.length)}`, () => ((state.all = true), rerender())),
      ` (first ${bytesSize(PREVIEW_BYTES)} shown)`,
    );
  }
  return el("div", {}, el("pre", { data: { block: name } }, body), el("div", { class: "note" }, ...controls));
}

function jidLinks(jids: readonly string[]): Node | string {
  if (jids.length === 0) return "–";
  return el("span", { class: "mono" }, ...jids.flatMap((jid, i) => [i ? ", " : "", link(jid, ["job", jid])]));
}

/** What the handler of the current or last attempt last reported: a bar, the percent and its message. */
function progressView(job: Job): HTMLElement {
  const p = job.progress;
  if (!p) return el("span", { data: { block: "progress" } }, "–");
  const bar = el("progress");
  bar.max = 100;
  bar.value = p.percent;
  return el("span", { data: { block: "progress" } }, bar, ` ${p.percent}%`, p.message ? ` ${p.message}` : "", ` (${when(p.updatedAt)})`);
}

/** The size of the job's last checkpoint. */
function checkpointView(job: Job): HTMLElement {
  return el("span", { data: { block: "checkpoint" } }, job.checkpoint.byteLength ? `${bytesSize(job.checkpoint.byteLength)} saved` : "–");
}

/** The job's life from its timestamps (Worq keeps these, not a log of every transition). */
function timeline(job: Job): [number, string][] {
  const events: [number | undefined, string][] = [
    [whenMs(job.createdAt), "Submitted"],
    [whenMs(job.at), "Requested run time"],
    [whenMs(job.enqueuedAt), "Last became ready"],
    [whenMs(job.startedAt), `Attempt ${job.attempt} started${job.workerId ? ` on ${job.workerId}` : ""}`],
    [job.failure && whenMs(job.failure.failedAt), "First failure"],
    [
      job.failure && job.failure.retryCount > 1 ? whenMs(job.failure.retriedAt) : undefined,
      `Last failure (failure ${job.failure?.retryCount ?? 0})`,
    ],
    [isWaitingForTime(job.state) ? whenMs(job.scheduledAt) : undefined, job.state === JobState.RETRYING ? "Retry due" : "Due"],
    [job.state === JobState.RUNNING ? whenMs(job.leaseExpiresAt) : undefined, "Lease lapses unless renewed"],
    [whenMs(job.completedAt), `Finished: ${JobState[job.state]}`],
    [whenMs(job.updatedAt), "Last state change"],
    [whenMs(job.expiresAt), isUnfinished(job.state) ? "Evicted if not finished by" : "Deleted at (ttl)"],
  ];
  return events.filter((e): e is [number, string] => e[0] !== undefined).sort((a, b) => a[0] - b[0]);
}

export const jobDetailPage: PageFactory = (root, path) => {
  const jid = path[1] ?? "";
  root.append(el("h1", {}, "Job ", el("span", { class: "mono" }, jid)));
  const actions = region(root, "actions");
  const body = region(root);
  const payloadState = {};
  const resultState = {};
  let current: Job | undefined;

  const act = (label: string, call: () => Promise<unknown>, confirmText?: string) =>
    button(
      label,
      () => {
        if (confirmText && !confirm(confirmText)) return;
        void call()
          .then(() => {
            notify(`${label}: done.`);
            return label === "Delete" ? void (location.hash = "#/jobs") : refresh();
          })
          .catch(showError);
      },
      { data: { action: label.toLowerCase().replace(" ", "-") }, class: label === "Delete" ? "danger" : "" },
    );

  function render(job: Job) {
    const rerender = () => render(job);
    const buttons: Node[] = [];
    if (isRetryable(job.state)) buttons.push(act("Retry", () => admin.retryJobs({ jids: [job.jid] })));
    if (isWaitingForTime(job.state)) buttons.push(act("Run now", () => admin.runJobsNow({ jids: [job.jid] })));
    if (isUnfinished(job.state)) buttons.push(act("Cancel", () => producer.cancel({ jid: job.jid }), "Cancel this job?"));
    buttons.push(act("Delete", () => admin.deleteJob({ jid: job.jid }), "Delete this job for good?"));
    actions(...buttons);

    const retry = job.retry;
    const tags = Object.entries(job.tags);
    const sections: Node[] = [
      el(
        "div",
        { class: "panel" },
        el(
          "dl",
          { class: "fields" },
          ...field("State", stateBadge(job.state)),
          ...field("Type", job.type),
          ...field("Queue", link(job.queue, ["jobs"], { queue: job.queue })),
          ...field("Priority", Priority[job.priority] ?? String(job.priority)),
          ...field(
            "Attempt",
            `${job.attempt} ${retry?.maxAttempts === 0 ? "(no limit)" : `of at most ${retry?.maxAttempts ?? "?"}`} (explicit fails: ${job.fails})`,
          ),
          ...field("Worker", job.workerId || "–"),
          ...field("Progress", progressView(job)),
          ...field("Checkpoint", checkpointView(job)),
          ...field("Created", when(job.createdAt)),
          ...field("Updated", when(job.updatedAt)),
          ...field("Expires", when(job.expiresAt)),
          ...field(
            "Lease for",
            `${span(msOf(job.reserveFor))}, execution timeout ${span(msOf(job.executionTimeout))}, ttl ${span(msOf(job.ttl))}`,
          ),
          ...field(
            "Retry policy",
            retry
              ? `${retry.maxAttempts === 0 ? "unlimited" : retry.maxAttempts} attempts, ${span(msOf(retry.initialDelay))} initial delay, max ${span(msOf(retry.maxDelay))}, multiplier ${retry.multiplier ?? 2}${retry.jitter ? ", jitter" : ""}${retry.retryTimeout === false ? ", timeouts not retried" : ""}${retry.retrySystem === false ? ", lapsed leases not retried" : ""}`
              : "–",
          ),
          ...field("Tags", tags.length ? el("span", {}, ...tags.map(([k, v], i) => el("code", {}, `${i ? " " : ""}${k}=${v}`))) : "–"),
          ...field("Correlation id", job.correlationId || "–"),
          ...field("Idempotency key", job.idempotencyKey || "–"),
          ...field("Callback", job.callbackUrl || "–"),
          ...field("Trace", job.trace?.traceparent ? el("code", {}, job.trace.traceparent) : "–"),
          ...field("Schedule", job.schedule ? `${job.schedule}, tick ${when(job.scheduledTick)}` : "–"),
          ...field("Previous leases", job.previousLeaseIds.length ? job.previousLeaseIds.join(", ") : "–"),
        ),
      ),
      el(
        "div",
        { class: "panel" },
        el("h2", {}, "Dependencies"),
        el(
          "dl",
          { class: "fields" },
          ...field("Parent (fan-out)", job.parentJid ? jidLinks([job.parentJid]) : "–"),
          ...field(
            `Depends on${job.dependsOn.length ? ` (${job.dependencyType === DependencyType.AFTER_ANY ? "after any outcome" : "after success"})` : ""}`,
            jidLinks(job.dependsOn),
          ),
          ...field("Still waiting on", jidLinks(job.waitingOn)),
          ...field("Children (unfinished)", el("span", { data: { block: "children" } }, "…")),
          ...field("Dependents (unfinished)", el("span", { data: { block: "dependents" } }, "…")),
        ),
      ),
      el(
        "div",
        { class: "panel" },
        el("h2", {}, "History"),
        table(
          ["When", "Event"],
          timeline(job).map(([ms, text]) => [new Date(ms).toLocaleString("sv-SE"), text]),
        ),
      ),
    ];
    if (job.failure) {
      sections.push(
        el(
          "div",
          { class: "panel" },
          el("h2", {}, "Failure"),
          el(
            "dl",
            { class: "fields" },
            ...field("Error", `${job.failure.errtype || "error"} (${FailureCategory[job.failure.category] ?? "?"})`),
            ...field("Failures", String(job.failure.retryCount)),
            ...field("First / last", `${when(job.failure.failedAt)} / ${when(job.failure.retriedAt)}`),
            ...(job.failure.code ? field("Code", job.failure.code) : []),
          ),
          el("h2", {}, "Message"),
          preview(job.failure.message, "failure"),
          job.failure.cause ? el("div", {}, el("h2", {}, "Cause"), preview(job.failure.cause, "cause")) : null,
          job.failure.backtrace.length
            ? el("div", {}, el("h2", {}, "Backtrace"), preview(job.failure.backtrace.join("\n"), "backtrace"))
            : null,
        ),
      );
    }
    sections.push(
      el(
        "div",
        { class: "panel" },
        el("h2", {}, "Args"),
        preview(json(listJson(job.args) ?? []), "args"),
        el("h2", {}, "Kwargs"),
        preview(json(job.kwargs ?? {}), "kwargs"),
        el("h2", {}, "Custom"),
        preview(json(job.custom ?? {}), "custom"),
        el("h2", {}, "Payload"),
        bytesView(job.payload, "payload", payloadState, rerender),
        job.state === JobState.COMPLETED
          ? el("div", {}, el("h2", {}, "Result"), bytesView(job.result, "result", resultState, rerender))
          : null,
      ),
    );
    body(...sections);
    void children(job).catch(() => {});
  }

  /** Unfinished jobs spawned by this one or waiting for it (the server indexes only live ones cheaply). */
  async function children(job: Job) {
    const [spawned, dependents] = await Promise.all([
      admin.listJobs({ parentJid: job.jid, pageSize: 100 }),
      admin.listJobs({ dependsOnJid: job.jid, pageSize: 100 }),
    ]);
    root.querySelector('[data-block="children"]')?.replaceChildren(jidLinks(spawned.jobs.map((j) => j.jid)));
    root.querySelector('[data-block="dependents"]')?.replaceChildren(jidLinks(dependents.jobs.map((j) => j.jid)));
  }

  async function refresh() {
    const { job } = await admin.getJob({ jid });
    if (!job) return;
    // Re-render only when the job changed, so reading a long payload is not interrupted; a
    // handler's progress report or checkpoint updates its own field alone.
    if (current && whenMs(current.updatedAt) === whenMs(job.updatedAt) && current.state === job.state) {
      current = job;
      root.querySelector('[data-block="progress"]')?.replaceWith(progressView(job));
      root.querySelector('[data-block="checkpoint"]')?.replaceWith(checkpointView(job));
      return;
    }
    current = job;
    render(job);
  }
  return { refresh };
};
