/**
 * `call` at once, then at most once per `gapMs` while more calls come: the calls of a burst
 * are joined, and the last one is never dropped (it goes at the end of its gap). The timer
 * does not keep the process alive.
 */
export function coalesced(call: () => void, gapMs: number): () => void {
  let timer: NodeJS.Timeout | undefined;
  let more = false;
  const gapEnded = () => {
    timer = undefined;
    if (!more) return;
    more = false;
    send();
  };
  const send = () => {
    call();
    timer = setTimeout(gapEnded, gapMs);
    timer.unref();
  };
  return () => {
    if (timer) more = true;
    else send();
  };
}
