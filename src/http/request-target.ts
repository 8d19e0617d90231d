/** The parts of an HTTP request-target the routes look at. */
export interface RequestTarget {
  /** The path as sent, still percent-encoded (a route decodes the segments it reads). */
  path: string;
  query: URLSearchParams;
  /** `path` plus the query as sent: the origin-form every route and the leader link get. */
  originForm: string;
}

/**
 * Parses a request-target once, for every route: origin-form (`/v1/jobs?x=1`), absolute-form
 * (`http://host/v1/jobs`, which proxies send and HTTP/1.1 servers must accept) and
 * asterisk-form (`*`, for a server-wide OPTIONS; path `*`, which no route serves). Returns
 * undefined for anything else, or an absolute-form that is not a valid URL, which the caller
 * answers 400: a route never sees a target it cannot parse.
 */
export function parseRequestTarget(target: string | undefined): RequestTarget | undefined {
  if (target === "*") return { path: "*", query: new URLSearchParams(), originForm: "*" };
  let originForm: string;
  if (target?.startsWith("/")) originForm = target;
  else if (target !== undefined && /^https?:\/\//i.test(target)) {
    if (!URL.canParse(target)) return undefined;
    const url = new URL(target);
    originForm = `${url.pathname}${url.search}`;
  } else return undefined;
  const queryAt = originForm.indexOf("?");
  const path = queryAt < 0 ? originForm : originForm.slice(0, queryAt);
  return { path, query: new URLSearchParams(queryAt < 0 ? "" : originForm.slice(queryAt + 1)), originForm };
}
