/**
 * The only way the dashboard builds DOM. Text always goes in as text nodes (never as HTML):
 * job data is attacker-controlled, so nothing here parses markup.
 */
export type Child = Node | string | number | bigint | null | undefined | false;

export interface Props {
  class?: string;
  title?: string;
  /** Only ever a link the dashboard builds itself (see `link`). */
  href?: string;
  type?: string;
  name?: string;
  value?: string;
  placeholder?: string;
  disabled?: boolean;
  checked?: boolean;
  hidden?: boolean;
  data?: Record<string, string>;
  on?: { [K in keyof HTMLElementEventMap]?: (event: HTMLElementEventMap[K]) => void };
}

export function el<K extends keyof HTMLElementTagNameMap>(tag: K, props: Props = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (props.class) node.className = props.class;
  if (props.title !== undefined) node.title = props.title;
  if (props.href !== undefined) node.setAttribute("href", props.href);
  for (const key of ["type", "name", "placeholder"] as const) {
    if (props[key] !== undefined) node.setAttribute(key, props[key]!);
  }
  if (props.value !== undefined) (node as HTMLInputElement).value = props.value;
  if (props.disabled) (node as HTMLButtonElement).disabled = true;
  if (props.checked) (node as HTMLInputElement).checked = true;
  if (props.hidden) node.hidden = true;
  for (const [key, value] of Object.entries(props.data ?? {})) node.dataset[key] = value;
  for (const [event, handler] of Object.entries(props.on ?? {})) node.addEventListener(event, handler as EventListener);
  append(node, children);
  return node;
}

function append(parent: Node, children: Child[]): void {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    parent.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** A link inside the dashboard: `#/<path>` with each segment and parameter URI-encoded. */
export function route(path: string[], params: Record<string, string | undefined> = {}): string {
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) if (value) query.set(key, value);
  const search = query.toString();
  return `#/${path.map(encodeURIComponent).join("/")}${search ? `?${search}` : ""}`;
}

export function link(text: Child, path: string[], params: Record<string, string | undefined> = {}, props: Props = {}): HTMLAnchorElement {
  return el("a", { ...props, href: route(path, params) }, text);
}

export function button(text: string, onClick: () => void, props: Props = {}): HTMLButtonElement {
  return el("button", { type: "button", ...props, on: { click: () => onClick() } }, text);
}

/** A table with a header row; `rows` are arrays of cells (a cell is a child or a <td>). */
export function table(
  headers: (string | HTMLTableCellElement)[],
  rows: Child[][] | HTMLTableRowElement[],
  empty = "Nothing here.",
): HTMLElement {
  const head = el("tr", {}, ...headers.map((h) => (typeof h === "string" ? el("th", {}, h) : h)));
  const body = el("tbody");
  for (const row of rows) {
    body.appendChild(
      row instanceof HTMLTableRowElement
        ? row
        : el("tr", {}, ...row.map((cell) => (cell instanceof HTMLTableCellElement ? cell : el("td", {}, cell)))),
    );
  }
  if (rows.length === 0) body.appendChild(el("tr", {}, Object.assign(el("td", { class: "empty" }, empty), { colSpan: headers.length })));
  return el("div", { class: "table-wrap" }, el("table", {}, el("thead", {}, head), body));
}

export function num(value: Child, props: Props = {}): HTMLTableCellElement {
  return el("td", { ...props, class: `num ${props.class ?? ""}`.trim() }, value);
}
