// When and how often an ask tries again: on failures that say nothing about the
// request itself, with exponential backoff and jitter, within the ask's deadline and
// while failures in a row last less than its retry budget.

import { AskgateError } from "./errors.js";

/** First and longest pause between attempts. */
const MIN_DELAY_MS = 100;
const MAX_DELAY_MS = 5_000;

/**
 * A failed attempt that waited at least this long at a server had reached it (the ask
 * was pending there): the failures before it are not part of the streak.
 */
const REACHED_A_SERVER_MS = 1_000;

/** Pauses between attempts: exponential with jitter, capped; endless. */
export function* backoff(): Generator<number, never> {
  let delay = MIN_DELAY_MS;
  for (;;) {
    yield delay / 2 + Math.random() * (delay / 2);
    delay = Math.min(delay * 2, MAX_DELAY_MS);
  }
}

/** Waits `ms`, or until `signal` aborts (then throws its reason). */
export function pause(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const aborted = (): void => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", aborted);
      resolve();
    }, ms);
    signal?.addEventListener("abort", aborted, { once: true });
  });
}

export class Retries {
  private readonly deadline: number | undefined;
  private readonly delays = backoff();
  private failingSince: number | undefined;

  constructor(
    timeoutMs: number | undefined,
    private readonly retry: boolean,
    private readonly retryForMs: number,
  ) {
    this.deadline = timeoutMs === undefined ? undefined : performance.now() + timeoutMs;
  }

  /** What is left of the deadline for the next attempt; throws ASK_EXPIRED when nothing is. */
  timeoutMs(): number | undefined {
    if (this.deadline === undefined) {
      return undefined;
    }
    const left = this.deadline - performance.now();
    if (left <= 0) {
      throw AskgateError.localDeadline();
    }
    return Math.max(1, Math.floor(left));
  }

  /**
   * The pause before trying again after `error` (of the attempt that started at
   * `attempt`); throws the error when there is no next attempt.
   */
  pauseAfter(attempt: number, error: AskgateError): number {
    const now = performance.now();
    if (error.reason !== "ERROR_REASON_UNSPECIFIED" && now - attempt >= REACHED_A_SERVER_MS) {
      this.failingSince = now;
    }
    this.failingSince ??= attempt;
    if (!this.retry || !error.retryable || now - this.failingSince >= this.retryForMs) {
      throw error;
    }
    let next = this.delays.next().value;
    if (this.deadline !== undefined) {
      next = Math.min(next, Math.max(this.deadline - now, 0));
    }
    return next;
  }
}
