import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { ListJobsRequestSchema } from "@worq/client/gen/worq/v1/admin_service_pb.js";
import { JobState, type Job } from "@worq/client/gen/worq/v1/job_pb.js";
import { admin, producer } from "../api.js";
import { button, el, link, num, route, table } from "../dom.js";
import { relative, shortJid, truncate, whenMs } from "../format.js";
import { notify, region, type PageFactory } from "../page.js";
import { isRetryable, isUnfinished, isWaitingForTime, STATES, stateBadge, stateName, stateOf } from "../states.js";
import { showError } from "./queues.js";

const FILTERS = ["queue", "state", "type", "tag", "correlation", "jid", "from", "to"] as const;

/** `key=value` (that value) or `key` (any value) from the tag filter box. */
function tagFilter(text: string): Record<string, string> {
  const tags: Record<string, string> = {};
  for (const part of text
    .split(",")
    .map((p) => p.trim())
    .filter(Boolean)) {
    const eq = part.indexOf("=");
    if (eq < 0) tags[part] = "";
    else tags[part.slice(0, eq).trim()] = part.slice(eq + 1).trim();
  }
  return tags;
}

function requestOf(params: URLSearchParams, fixedState: JobState | undefined): MessageInitShape<typeof ListJobsRequestSchema> {
  const from = params.get("from");
  const to = params.get("to");
  return {
    queue: params.get("queue") ?? "",
    state: fixedState ?? stateOf(params.get("state")),
    type: params.get("type") ?? "",
    tags: tagFilter(params.get("tag") ?? ""),
    correlationId: params.get("correlation") ?? "",
    jidPrefix: (params.get("jid") ?? "").toLowerCase(),
    ...(from ? { createdAfter: timestampFromMs(new Date(from).getTime()) } : {}),
    ...(to ? { createdBefore: timestampFromMs(new Date(to).getTime()) } : {}),
    pageSize: Number(params.get("size") ?? 50) || 50,
  };
}

/** The time that matters for a job in its state: when it runs, ran or finished. */
function timeOf(job: Job): string {
  const at = isWaitingForTime(job.state)
    ? whenMs(job.scheduledAt)
    : job.state === JobState.RUNNING
      ? whenMs(job.startedAt)
      : (whenMs(job.completedAt) ?? whenMs(job.updatedAt));
  return at === undefined ? "" : relative(at);
}

/**
 * Jobs of a queue and state with filters, cursor pagination and bulk actions. `fixedState`
 * makes it the Scheduled, Retries or Dead list (state chosen by the page, not the form).
 */
export function jobsPage(title: string, fixedState?: JobState): PageFactory {
  return (root, path, params) => {
    const selected = new Set<string>();
    const tokens = [""]; // cursor of each page visited so far; the last is the current one
    let shown: Job[] = [];
    let nextToken = "";
    const request = requestOf(params, fixedState);

    root.append(el("h1", {}, title), filterForm(path, params, fixedState));
    const actions = region(root, "actions");
    const list = region(root);
    const pager = region(root, "actions");

    async function run(label: string, jids: string[], call: (jids: string[]) => Promise<number>, confirmText?: string) {
      if (jids.length === 0) return;
      if (confirmText && !confirm(confirmText.replace("{n}", String(jids.length)))) return;
      const done = await call(jids);
      notify(`${label}: ${done} of ${jids.length} job${jids.length === 1 ? "" : "s"}.`);
      selected.clear();
      await refresh();
    }
    const retry = (jids: string[]) => run("Retried", jids, async (j) => Number((await admin.retryJobs({ jids: j })).retried));
    const runNow = (jids: string[]) =>
      run("Scheduled to run now", jids, async (j) => Number((await admin.runJobsNow({ jids: j })).scheduled));
    const remove = (jids: string[]) =>
      run(
        "Deleted",
        jids,
        async (j) => (await Promise.allSettled(j.map((jid) => admin.deleteJob({ jid })))).filter((r) => r.status === "fulfilled").length,
        "Delete {n} job(s) for good?",
      );
    const cancel = (jids: string[]) =>
      run(
        "Cancelled",
        jids,
        async (j) => (await Promise.allSettled(j.map((jid) => producer.cancel({ jid })))).filter((r) => r.status === "fulfilled").length,
        "Cancel {n} job(s)?",
      );
    const guard = (promise: Promise<unknown>) => void promise.catch(showError);

    function renderActions() {
      const picked = shown.filter((job) => selected.has(job.jid));
      const bulk = (label: string, applies: (state: JobState) => boolean, action: (jids: string[]) => Promise<void>, danger = false) => {
        const jids = picked.filter((job) => applies(job.state)).map((job) => job.jid);
        return button(`${label}${jids.length ? ` (${jids.length})` : ""}`, () => guard(action(jids)), {
          disabled: jids.length === 0,
          class: danger ? "danger" : "",
          data: { bulk: label },
        });
      };
      // A fixed-state list (Scheduled, Retries, Dead) offers only what applies to its state.
      const offered = (applies: (state: JobState) => boolean) => fixedState === undefined || applies(fixedState);
      const children: Node[] = [
        el("span", { class: "note" }, `${picked.length} selected`),
        offered(isRetryable) && bulk("Retry", isRetryable, retry),
        offered(isWaitingForTime) && bulk("Run now", isWaitingForTime, runNow),
        offered(isUnfinished) && bulk("Cancel", isUnfinished, cancel),
        bulk("Delete", () => true, remove, true),
      ].filter((child): child is HTMLElement => child !== false);
      if (fixedState === JobState.DEAD_LETTER) {
        const queue = request.queue ?? "";
        children.push(
          button(queue ? `Retry all dead in ${queue}` : "Retry all dead", () =>
            guard(
              (async () => {
                if (!confirm(queue ? `Retry every dead job of ${queue}?` : "Retry every dead job of every queue?")) return;
                const { retried } = await admin.retryJobs({ queue });
                notify(`Retried ${retried} dead jobs.`);
                await refresh();
              })(),
            ),
          ),
        );
      }
      actions(...children);
    }

    function rowOf(job: Job): HTMLTableRowElement {
      const box = el("input", { type: "checkbox", checked: selected.has(job.jid), title: `select ${job.jid}` });
      box.addEventListener("change", () => {
        if (box.checked) selected.add(job.jid);
        else selected.delete(job.jid);
        renderActions();
      });
      const rowActions: Node[] = [];
      if (isRetryable(job.state)) rowActions.push(button("Retry", () => guard(retry([job.jid])), { data: { action: "retry" } }));
      if (isWaitingForTime(job.state)) rowActions.push(button("Run now", () => guard(runNow([job.jid])), { data: { action: "run-now" } }));
      if (isUnfinished(job.state)) rowActions.push(button("Cancel", () => guard(cancel([job.jid])), { data: { action: "cancel" } }));
      rowActions.push(button("Delete", () => guard(remove([job.jid])), { class: "danger", data: { action: "delete" } }));
      const tags = Object.entries(job.tags)
        .map(([k, v]) => (v ? `${k}=${v}` : k))
        .join(", ");
      return el(
        "tr",
        { data: { jid: job.jid } },
        el("td", {}, box),
        el("td", { class: "mono" }, link(shortJid(job.jid), ["job", job.jid], {}, { title: job.jid })),
        el("td", { class: "wrap" }, job.type),
        el("td", {}, job.queue),
        el("td", {}, stateBadge(job.state)),
        num(job.attempt),
        el("td", { title: new Date(whenMs(job.createdAt) ?? 0).toISOString() }, relative(whenMs(job.createdAt) ?? 0)),
        el("td", {}, timeOf(job)),
        el("td", { class: "wrap hide-narrow" }, truncate(tags, 80)),
        el("td", { class: "wrap" }, truncate(job.failure?.message ?? "", 120)),
        el("td", {}, ...rowActions),
      );
    }

    async function refresh() {
      const page = await admin.listJobs({ ...request, pageToken: tokens.at(-1)! });
      shown = page.jobs;
      nextToken = page.nextPageToken;
      for (const jid of [...selected]) if (!shown.some((job) => job.jid === jid)) selected.delete(jid);
      const all = el("input", {
        type: "checkbox",
        title: "select all on this page",
        checked: shown.length > 0 && shown.every((job) => selected.has(job.jid)),
      });
      all.addEventListener("change", () => {
        for (const job of shown) all.checked ? selected.add(job.jid) : selected.delete(job.jid);
        void refresh().catch(showError);
      });
      const headers = [
        el("th", {}, all),
        "Job",
        "Type",
        "Queue",
        "State",
        "Attempt",
        "Created",
        "When",
        el("th", { class: "hide-narrow" }, "Tags"),
        "Last error",
        "",
      ];
      const empty = nextToken ? "No matching job among the jobs examined so far: Next page searches on." : "No jobs match.";
      list(table(headers, shown.map(rowOf), empty));
      renderActions();
      pager(
        button("First page", () => guard(((tokens.length = 1), refresh())), { disabled: tokens.length === 1 }),
        button("Previous", () => guard((tokens.pop(), refresh())), { disabled: tokens.length === 1 }),
        el("span", { class: "note" }, `page ${tokens.length}`),
        button("Next page", () => guard((tokens.push(nextToken), refresh())), { disabled: !nextToken, data: { pager: "next" } }),
      );
    }
    return { refresh };
  };
}

function filterForm(path: string[], params: URLSearchParams, fixedState: JobState | undefined): HTMLFormElement {
  const input = (name: string, label: string, type = "text", placeholder = "") =>
    el("label", {}, label, el("input", { name, type, value: params.get(name) ?? "", placeholder }));
  const stateSelect = el(
    "select",
    { name: "state" },
    el("option", { value: "" }, "All unfinished"),
    ...STATES.map(([state, label]) => el("option", { value: stateName(state) }, label)),
  );
  stateSelect.value = params.get("state") ?? "";
  const form = el(
    "form",
    { class: "filters" },
    input("queue", "Queue", "text", "any"),
    fixedState === undefined ? el("label", {}, "State", stateSelect) : null,
    input("type", "Type", "text", "any"),
    input("tag", "Tag", "text", "key or key=value"),
    input("correlation", "Correlation id"),
    input("jid", "Jid starts with", "text", "hex"),
    input("from", "Submitted from", "datetime-local"),
    input("to", "Submitted before", "datetime-local"),
    el("button", { type: "submit", class: "primary" }, "Filter"),
    el("a", { href: route(path) }, "Clear"),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const data = new FormData(form);
    const next: Record<string, string> = {};
    for (const key of FILTERS) {
      const value = data.get(key);
      if (typeof value === "string" && value) next[key] = value;
    }
    location.hash = route(path, next);
  });
  return form;
}
