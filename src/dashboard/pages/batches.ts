import { BatchState, type Batch, type BatchCallback } from "@worq/client/gen/worq/v1/batch_pb.js";
import { admin } from "../api.js";
import { el, link, num, table } from "../dom.js";
import { count, shortJid, when } from "../format.js";
import { region, type PageFactory } from "../page.js";

/** A batch's state as the table shows it. */
function stateText(state: BatchState): string {
  return (BatchState[state] ?? String(state)).replaceAll("_", " ").toLowerCase();
}

/** A callback: its job's type and queue, and the job once enqueued (linked). */
function callbackCell(callback: BatchCallback | undefined, jid: string, col: string): HTMLTableCellElement {
  const webhook = callback?.webhookUrl ? [el("div", { class: "webhook" }, `POST ${callback.webhookUrl}`)] : [];
  if (!callback?.job) return el("td", { data: { col } }, ...(webhook.length > 0 ? webhook : ["–"]));
  const target = `${callback.job.type}${callback.job.queue ? ` @ ${callback.job.queue}` : ""}`;
  return el("td", { data: { col } }, target, ...(jid ? [" → ", link(shortJid(jid), ["job", jid])] : [" (not run)"]), ...webhook);
}

export const batchesPage: PageFactory = (root) => {
  root.append(el("h1", {}, "Batches"));
  const list = region(root);
  const refresh = async () => {
    const { batches } = await admin.listBatches({ pageSize: 200 });
    const headers = [
      "Batch",
      "Description",
      "State",
      "Jobs",
      "Pending",
      "Completed",
      "Failed",
      "Child batches",
      "On success",
      "On complete",
      "Created",
      "Finished",
    ];
    const rows = batches.map((b: Batch) =>
      el(
        "tr",
        { data: { batch: b.id } },
        el("td", { title: b.id + (b.parentBatchId ? ` (child of ${b.parentBatchId})` : "") }, shortJid(b.id)),
        el("td", {}, b.description),
        el("td", { data: { col: "state" }, class: `batch-${BatchState[b.state]?.toLowerCase() ?? ""}` }, stateText(b.state)),
        num(count(b.total), { data: { col: "total" } }),
        num(count(b.pending), { data: { col: "pending" } }),
        num(count(b.completed), { data: { col: "completed" } }),
        num(count(b.failed), { data: { col: "failed" } }),
        num(b.childBatches === 0n ? "–" : `${count(b.childBatches)} (${count(b.pendingChildBatches)} pending)`, {
          data: { col: "children" },
        }),
        callbackCell(b.onSuccess, b.onSuccessJid, "on-success"),
        callbackCell(b.onComplete, b.onCompleteJid, "on-complete"),
        el("td", {}, when(b.createdAt)),
        el("td", {}, b.finishedAt ? when(b.finishedAt) : "–"),
      ),
    );
    list(table(headers, rows, "No batch has been created yet."));
  };
  return { refresh };
};
