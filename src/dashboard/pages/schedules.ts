import type { Schedule } from "@worq/client/gen/worq/v1/schedule_pb.js";
import { admin } from "../api.js";
import { button, el, link, num, table } from "../dom.js";
import { timestampMs } from "@bufbuild/protobuf/wkt";
import { count, relative, shortJid, when } from "../format.js";
import { notify, region, type PageFactory } from "../page.js";
import { stateBadge } from "../states.js";
import { showError } from "./queues.js";

/** Schedules (docs/schedules.md): each with its next runs and last outcome; pause, resume, run now. */
export const schedulesPage: PageFactory = (root) => {
  root.append(el("h1", {}, "Schedules"));
  const list = region(root);
  let refresh: () => Promise<void>;

  async function act(schedule: Schedule, action: "pause" | "resume" | "run") {
    const name = schedule.name;
    if (action === "pause") {
      await admin.pauseSchedule({ name });
      notify(`Paused ${name}: its ticks are missed ticks until it is resumed.`);
    } else if (action === "resume") {
      await admin.resumeSchedule({ name });
      notify(`Resumed ${name}.`);
    } else {
      const { jid } = await admin.runScheduleNow({ name });
      notify(jid ? `Enqueued ${name}'s job ${shortJid(jid)}.` : `Skipped: ${name}'s previous job has not finished (overlap policy).`);
    }
    await refresh();
  }

  refresh = async () => {
    const schedules = [];
    let pageToken = "";
    do {
      const page = await admin.listSchedules({ pageToken });
      schedules.push(...page.schedules);
      pageToken = page.nextPageToken;
    } while (pageToken !== "");
    const headers = ["Schedule", "Cron", "Time zone", "Job", "Next run", "Last run", "Last outcome", "Skipped", "Source", "Status", ""];
    const rows = schedules.map((s) =>
      el(
        "tr",
        { data: { schedule: s.name } },
        el("td", { title: s.description }, s.name),
        el("td", { data: { col: "cron" } }, el("code", {}, s.cron)),
        el("td", { data: { col: "zone" } }, s.timeZone),
        el("td", { data: { col: "job" } }, `${s.job?.type ?? ""} on ${s.job?.queue || "default"}`),
        // The next run, and the ones after it on hover.
        el("td", { data: { col: "next" }, title: s.nextRuns.map((t) => when(t)).join("\n") }, s.nextRuns[0] ? when(s.nextRuns[0]) : "–"),
        el("td", { data: { col: "last-run" } }, s.lastRunAt ? relative(timestampMs(s.lastRunAt)) : "never"),
        el(
          "td",
          { data: { col: "outcome" } },
          ...(s.lastJid ? [stateBadge(s.lastState), " ", link(shortJid(s.lastJid), ["job", s.lastJid])] : ["–"]),
        ),
        num(count(s.skippedTicks), { data: { col: "skipped" } }),
        el("td", { data: { col: "source" } }, s.source),
        el("td", { data: { col: "status" } }, s.paused ? el("span", { class: "paused" }, "paused") : "active"),
        el(
          "td",
          { class: "actions-cell" },
          s.paused
            ? button("Resume", () => void act(s, "resume").catch(showError))
            : button("Pause", () => void act(s, "pause").catch(showError)),
          " ",
          button("Run now", () => void act(s, "run").catch(showError)),
        ),
      ),
    );
    list(table(headers, rows, "No schedules: add one with worq schedule add, the admin API, or worq serve --schedules."));
  };
  return { refresh: () => refresh() };
};
