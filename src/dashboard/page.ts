import { el } from "./dom.js";

/** A page: built once per visit into `root`, then refreshed every few seconds (live updates). */
export interface PageView {
  refresh(): Promise<void>;
}

export type PageFactory = (root: HTMLElement, path: string[], params: URLSearchParams) => PageView;

let noticeTimer: ReturnType<typeof setTimeout> | undefined;

/** Shows what an action did, for a few seconds. */
export function notify(text: string): void {
  const notice = document.getElementById("notice")!;
  notice.textContent = text;
  notice.hidden = false;
  clearTimeout(noticeTimer);
  noticeTimer = setTimeout(() => (notice.hidden = true), 4_000);
}

/** A region of a page whose content is rebuilt on every refresh. */
export function region(root: HTMLElement, className = ""): (...children: Node[]) => void {
  const box = el("div", { class: className });
  root.append(box);
  return (...children) => box.replaceChildren(...children);
}
