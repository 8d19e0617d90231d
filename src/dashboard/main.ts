import { JobState } from "@worq/client/gen/worq/v1/job_pb.js";
import { describeError, isUnauthenticated, setToken, storedToken } from "./api.js";
import { button, el, route } from "./dom.js";
import { sample, SAMPLE_EVERY_MS } from "./history.js";
import type { PageFactory, PageView } from "./page.js";
import { batchesPage } from "./pages/batches.js";
import { jobDetailPage } from "./pages/job-detail.js";
import { jobsPage } from "./pages/jobs.js";
import { overviewPage } from "./pages/overview.js";
import { queuesPage } from "./pages/queues.js";
import { schedulesPage } from "./pages/schedules.js";
import { workersPage } from "./pages/workers.js";

/** Pages by the first segment of the hash route (`#/queues`, `#/job/<jid>`, …). */
const PAGES: Record<string, [string, PageFactory]> = {
  "": ["Overview", overviewPage],
  queues: ["Queues", queuesPage],
  jobs: ["Jobs", jobsPage("Jobs")],
  scheduled: ["Scheduled", jobsPage("Scheduled (delayed) jobs", JobState.DELAYED)],
  retries: ["Retries", jobsPage("Retries", JobState.RETRYING)],
  dead: ["Dead", jobsPage("Dead jobs", JobState.DEAD_LETTER)],
  schedules: ["Schedules", schedulesPage],
  workers: ["Workers", workersPage],
  batches: ["Batches", batchesPage],
  job: ["Job", jobDetailPage],
};
const NAV = ["", "queues", "jobs", "scheduled", "retries", "dead", "schedules", "workers", "batches"];
const REFRESH_EVERY_MS = 2_000;

const main = document.getElementById("main")!;
const banner = document.getElementById("banner")!;
const live = document.getElementById("live")!;
let page: PageView | undefined;
let refreshing = false;
let needsToken = false;

function showBanner(text: string | undefined) {
  banner.hidden = text === undefined;
  banner.textContent = text ?? "";
  live.classList.toggle("stale", text !== undefined);
}

/** A failed call: ask for a token when the server wants one, else say what went wrong. */
function handleError(error: unknown) {
  if (isUnauthenticated(error)) {
    if (!needsToken) showTokenForm(storedToken() !== null);
    return;
  }
  showBanner(describeError(error));
}
window.addEventListener("worq-error", (event) => handleError((event as CustomEvent).detail));

function showTokenForm(rejected: boolean) {
  needsToken = true;
  page = undefined;
  const input = el("input", { type: "password", name: "token", placeholder: "API token" });
  const form = el(
    "form",
    { class: "panel token-form" },
    el("h1", {}, "Token required"),
    el(
      "p",
      {},
      rejected
        ? "The server refused this token. Enter another one."
        : "This server requires an API token for the dashboard, as for the API.",
    ),
    input,
    el("button", { type: "submit", class: "primary" }, "Use token"),
    el("p", { class: "note" }, "Kept in this tab only (sessionStorage) and sent as an Authorization header on each call."),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    setToken(input.value.trim() || null);
    needsToken = false;
    showPage();
  });
  main.replaceChildren(form);
  showBanner(undefined);
  input.focus();
}

async function refresh() {
  if (!page || refreshing) return;
  refreshing = true;
  const current = page;
  try {
    await current.refresh();
    if (page === current) showBanner(undefined);
  } catch (error) {
    if (page === current) handleError(error);
  } finally {
    refreshing = false;
  }
}

function showPage() {
  const hash = location.hash.replace(/^#\/?/, "");
  const [pathPart = "", query = ""] = hash.split("?");
  const path = pathPart.split("/").map(decodeURIComponent);
  const key = path[0] ?? "";
  const [, factory] = PAGES[key] ?? PAGES[""]!;
  const nav = document.getElementById("nav")!;
  nav.replaceChildren(
    ...NAV.map((name) => el("a", { href: route(name ? [name] : []), class: name === key ? "active" : "" }, PAGES[name]![0])),
    storedToken() ? button("Forget token", () => (setToken(null), showPage())) : "",
  );
  if (needsToken) return;
  main.replaceChildren();
  page = factory(main, path, new URLSearchParams(query));
  document.title = `${PAGES[key]?.[0] ?? "Overview"} · Worq`;
  refreshing = false;
  void refresh();
}

window.addEventListener("hashchange", showPage);
showPage();
setInterval(() => {
  if (!document.hidden) void refresh();
}, REFRESH_EVERY_MS);
const takeSample = () => void sample().catch(() => {});
takeSample();
setInterval(takeSample, SAMPLE_EVERY_MS);
