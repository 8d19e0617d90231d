/**
 * Faktory's operator commands: INFO, FLUSH, QUEUE, MUTATE, and Enterprise's BATCH and TRACK
 * refused as Faktory's open-source server refuses them.
 */
import type { FaktoryHandler } from "./door.js";

export const ADMIN_HANDLERS: Record<string, FaktoryHandler> = {};

/** Who may send each command when the server has tokens. */
export const ADMIN_ROLES: Record<string, readonly string[]> = {};
