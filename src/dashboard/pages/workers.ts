import { JobState, type Job } from "@worq/client/gen/worq/v1/job_pb.js";
import { ControlAction } from "@worq/client/gen/worq/v1/worker_service_pb.js";
import type { WorkerInfo } from "@worq/client/gen/worq/v1/admin_service_pb.js";
import { admin } from "../api.js";
import { button, el, link, num, table } from "../dom.js";
import { relative, shortJid, span, whenMs } from "../format.js";
import { notify, region, type PageFactory } from "../page.js";
import { showError } from "./queues.js";

export const workersPage: PageFactory = (root) => {
  root.append(el("h1", {}, "Workers"));
  const list = region(root);

  async function control(worker: WorkerInfo, action: ControlAction) {
    const name = action === ControlAction.QUIET ? "Quiet" : "Terminate";
    const what = action === ControlAction.QUIET ? "stop taking new jobs" : "stop, giving back the jobs it holds";
    if (!confirm(`${name} worker "${worker.workerId}"? It will ${what}.`)) return;
    const { streams } = await admin.controlWorker({ workerId: worker.workerId, action });
    notify(`${name}: told ${streams} stream(s) of ${worker.workerId}.`);
    await refresh();
  }

  /** What each held job is and how long it has run (from the running jobs, one call). */
  async function runningJobs(): Promise<Map<string, Job>> {
    const running = new Map<string, Job>();
    let pageToken = "";
    do {
      const page = await admin.listJobs({ state: JobState.RUNNING, pageSize: 1000, pageToken });
      for (const job of page.jobs) running.set(job.jid, job);
      pageToken = page.nextPageToken;
    } while (pageToken && running.size < 10_000);
    return running;
  }

  async function refresh() {
    const [{ workers }, running] = await Promise.all([admin.listWorkers({}), runningJobs()]);
    const now = Date.now();
    const rows = workers.map((worker) => {
      const held = worker.held.map((ref) => {
        const job = running.get(ref.jid);
        const started = whenMs(job?.startedAt);
        return el(
          "div",
          { class: "mono" },
          link(shortJid(ref.jid), ["job", ref.jid], {}, { title: ref.jid }),
          ` ${job?.type ?? ""}${started === undefined ? "" : ` for ${span(now - started)}`}`,
        );
      });
      const labels = Object.entries(worker.labels)
        .map(([k, v]) => `${k}=${v}`)
        .join(", ");
      return el(
        "tr",
        { data: { worker: worker.workerId } },
        el("td", { class: "wrap" }, worker.workerId, labels ? el("div", { class: "note" }, labels) : null),
        el("td", { class: "wrap" }, worker.queues.join(", ")),
        num(worker.credits),
        num(worker.held.length, { data: { col: "held" } }),
        el("td", { class: "wrap" }, ...(held.length ? held : ["–"])),
        el("td", {}, relative(whenMs(worker.connectedAt) ?? now)),
        el(
          "td",
          {},
          button("Quiet", () => void control(worker, ControlAction.QUIET).catch(showError)),
          " ",
          button("Terminate", () => void control(worker, ControlAction.TERMINATE).catch(showError), { class: "danger" }),
        ),
      );
    });
    list(table(["Worker", "Queues", "Credits", "Holds", "Jobs held (running for)", "Connected", ""], rows, "No worker is connected."));
  }
  return { refresh };
};
