/** An IPC channel: a forked child as its parent holds it, or `process` in the child. */
export type IpcChannel = NodeJS.EventEmitter & { send?(message: unknown, callback: (error: Error | null) => void): boolean };

/**
 * Sends `question` over `channel` and resolves with what `answerOf` makes of the first message
 * it recognises as the answer (undefined: not this one); rejects when sending fails or no
 * answer came within `timeoutMs` (with `timeoutMessage`). The listener is removed either way,
 * so a question never outlives its wait.
 */
export function askOverIpc<M, A>(
  channel: IpcChannel,
  question: unknown,
  answerOf: (message: M) => A | undefined,
  timeoutMs: number,
  timeoutMessage: string,
): Promise<A> {
  return new Promise<A>((resolve, reject) => {
    const timer = setTimeout(() => finish(() => reject(new Error(timeoutMessage))), timeoutMs);
    const listen = (message: M) => {
      const answer = answerOf(message);
      if (answer !== undefined) finish(() => resolve(answer));
    };
    const finish = (settle: () => void) => {
      clearTimeout(timer);
      channel.off("message", listen);
      settle();
    };
    channel.on("message", listen);
    if (!channel.send) return finish(() => reject(new Error("no IPC channel to ask over")));
    channel.send(question, (error) => error && finish(() => reject(error)));
  });
}
