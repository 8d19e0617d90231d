import type { QueueStats } from "@worq/client/gen/worq/v1/admin_service_pb.js";
import { admin } from "../api.js";
import { button, el, link, num, table } from "../dom.js";
import { count, msOf, span } from "../format.js";
import { notify, region, type PageFactory } from "../page.js";

/** A count linking to the Jobs page for that queue and state. */
function countLink(value: bigint, queue: string, state: string): HTMLTableCellElement {
  return num(value === 0n ? "0" : link(count(value), ["jobs"], { queue, state }), { data: { col: state } });
}

export const queuesPage: PageFactory = (root) => {
  root.append(el("h1", {}, "Queues"));
  const list = region(root);
  let refresh: () => Promise<void>;

  async function act(queue: QueueStats, action: "pause" | "resume" | "purge") {
    if (action === "purge") {
      const waiting = queue.ready + queue.delayed + queue.retrying + queue.pending;
      if (!confirm(`Purge queue "${queue.queue}"? This deletes its ${waiting} waiting jobs (ready, delayed, retrying, pending) for good.`))
        return;
      const { deleted } = await admin.purgeQueue({ queue: queue.queue });
      notify(`Purged ${deleted} jobs from ${queue.queue}.`);
    } else if (action === "pause") {
      await admin.pauseQueue({ queue: queue.queue });
      notify(`Paused ${queue.queue}: workers get nothing from it until it is resumed.`);
    } else {
      await admin.resumeQueue({ queue: queue.queue });
      notify(`Resumed ${queue.queue}.`);
    }
    await refresh();
  }

  refresh = async () => {
    const { queues } = await admin.listQueues({ pageSize: 1000 });
    const headers = [
      "Queue",
      "Ready",
      "Delayed",
      "In flight",
      "Retrying",
      "Pending",
      "Dead",
      "Failed",
      "Completed",
      "Oldest ready",
      "Retried failures",
      "Limits",
      "Groups",
      "Status",
      "",
    ];
    const rows = queues.map((q) =>
      el(
        "tr",
        { data: { queue: q.queue } },
        el("td", {}, link(q.queue, ["jobs"], { queue: q.queue })),
        countLink(q.ready, q.queue, "SCHEDULED"),
        countLink(q.delayed, q.queue, "DELAYED"),
        countLink(q.inFlight, q.queue, "RUNNING"),
        countLink(q.retrying, q.queue, "RETRYING"),
        countLink(q.pending, q.queue, "PENDING"),
        countLink(q.dead, q.queue, "DEAD_LETTER"),
        countLink(q.failed, q.queue, "FAILED"),
        countLink(q.completed, q.queue, "COMPLETED"),
        num(q.ready > 0n ? span(msOf(q.latency)) : "–", { data: { col: "latency" } }),
        el(
          "td",
          { data: { col: "retry" }, title: "Whether TIMEOUT and SYSTEM (lapsed lease) failures are retried (worq configure)" },
          retriedFailures(q.config),
        ),
        el(
          "td",
          { data: { col: "limits" }, title: "Jobs running against --max-running, and the rate limit with its tokens now (worq configure)" },
          limitsText(q),
        ),
        el(
          "td",
          { data: { col: "groups" }, title: "Groups with ready or running jobs (JobSpec group_key), and those with the most ready jobs" },
          groupsText(q),
        ),
        el("td", { data: { col: "status" } }, q.paused ? el("span", { class: "paused" }, "paused") : "active"),
        el(
          "td",
          { class: "actions-cell" },
          q.paused
            ? button("Resume", () => void act(q, "resume").catch(showError))
            : button("Pause", () => void act(q, "pause").catch(showError)),
          " ",
          button("Purge…", () => void act(q, "purge").catch(showError), { class: "danger" }),
        ),
      ),
    );
    list(table(headers, rows, "No queue has been used yet."));
  };
  return { refresh: () => refresh() };
};

/** A queue's limits as the table shows them: "3 / 5 running · 10 per 1s (4 now)", or "none". */
function limitsText(q: QueueStats): string {
  const parts: string[] = [];
  if (q.config?.maxRunning) parts.push(`${q.inFlight} / ${q.config.maxRunning} running`);
  const rate = q.config?.rateLimit;
  if (rate && rate.starts > 0) {
    parts.push(`${rate.starts} per ${span(msOf(rate.period))}${q.rateTokens !== undefined ? ` (${q.rateTokens} now)` : ""}`);
  }
  for (const limit of q.config?.groupLimits?.limits ?? []) {
    const each = [
      ...(limit.maxRunning ? [`${limit.maxRunning} running`] : []),
      ...(limit.rateLimit && limit.rateLimit.starts > 0 ? [`${limit.rateLimit.starts} per ${span(msOf(limit.rateLimit.period))}`] : []),
    ];
    parts.push(`each ${limit.pattern}: ${each.join(", ")}`);
  }
  return parts.length > 0 ? parts.join(" · ") : "none";
}

/** A queue's groups as the table shows them: "12 · customer:1 40 ready, 2 running · …", or "–" for the default group alone. */
function groupsText(q: QueueStats): string {
  if (q.groups === 0n || (q.groups === 1n && q.topGroups[0]?.groupKey === "")) return "–";
  const top = q.topGroups.slice(0, 3).map((g) => {
    const tokens = g.rateTokens === undefined ? "" : `, ${g.rateTokens} tokens`;
    return `${g.groupKey === "" ? "(default)" : g.groupKey} ${g.ready} ready, ${g.inFlight} running${tokens}`;
  });
  return [String(q.groups), ...top].join(" · ");
}

/** Which of a queue's TIMEOUT and SYSTEM failures are retried (both unless configured otherwise). */
function retriedFailures(config: { retryTimeout?: boolean; retrySystem?: boolean } | undefined): string {
  const retried = [config?.retryTimeout !== false ? "timeouts" : "", config?.retrySystem !== false ? "lapsed leases" : ""].filter(Boolean);
  return retried.length > 0 ? retried.join(", ") : "neither";
}

/** Errors of a click (not of a refresh) surface in the banner. */
export function showError(error: unknown): void {
  window.dispatchEvent(new CustomEvent("worq-error", { detail: error }));
}
