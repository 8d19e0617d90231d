import { Code, ConnectError, createClient, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { AdminService } from "@worq/client/gen/worq/v1/admin_service_pb.js";
import { ProducerService } from "@worq/client/gen/worq/v1/producer_service_pb.js";

/**
 * The dashboard talks to the server through the public API only: the generated clients over
 * the Connect protocol, same origin. State changes are authorised by a header, never by a
 * cookie: when a token is set it goes as `Authorization: Bearer <token>` on every call. It
 * is kept in sessionStorage (gone when the tab closes).
 */
const TOKEN_KEY = "worq.token";

export function storedToken(): string | null {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function setToken(token: string | null): void {
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  else sessionStorage.removeItem(TOKEN_KEY);
}

const bearer: Interceptor = (next) => (request) => {
  const token = storedToken();
  if (token) request.header.set("authorization", `Bearer ${token}`);
  return next(request);
};

const transport = createConnectTransport({ baseUrl: location.origin, interceptors: [bearer] });

export const admin = createClient(AdminService, transport);
export const producer = createClient(ProducerService, transport);

/** The server wants a (different) token. A token lacking a permission is PERMISSION_DENIED: shown as an error. */
export function isUnauthenticated(error: unknown): boolean {
  return error instanceof ConnectError && error.code === Code.Unauthenticated;
}

/** A one-line description of a failed call, for the banner. */
export function describeError(error: unknown): string {
  if (error instanceof ConnectError) return `${Code[error.code] ?? "error"}: ${error.rawMessage}`;
  return String(error);
}
