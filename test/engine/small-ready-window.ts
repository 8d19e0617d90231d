// Imported first by small-ready-window.test.ts: every engine built by the suites it imports
// holds at most two ready jobs per queue and priority level in memory (readyWindow 2, see
// helpers.ts), so nearly every ready job is cold and paged in from the store.
(globalThis as { worqReadyWindow?: number }).worqReadyWindow = 2;
