import { Context } from '@temporalio/activity';

/** What the activities need from the outside world; tests pass fakes. */
export interface ActivityDeps {
  /**
   * Current time in milliseconds.
   * @default Date.now
   */
  now?: () => number;
}

/**
 * Builds the activities with their dependencies, in the style of Temporal's samples: the worker registers
 * the returned object, and workflows import only its type.
 */
export function createActivities(deps: ActivityDeps = {}) {
  const now = deps.now ?? Date.now;
  return {
    /** A trivial activity that proves the worker can run activities; used by the smoke workflow. */
    async ping(name: string): Promise<{ reply: string; attempt: number; at: number }> {
      const info = Context.current().info;
      return { reply: `pong: ${name}`, attempt: info.attempt, at: now() };
    },
  };
}

export type Activities = ReturnType<typeof createActivities>;
