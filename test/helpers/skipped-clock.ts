import type { ActivityInboundCallsInterceptor, ActivityInterceptorsFactory } from '@temporalio/worker';
import type { TestWorkflowEnvironment } from '@temporalio/testing';

/**
 * A clock that follows the time-skipping test server: real time plus however far the server has skipped.
 * The simulator and the activities share it, so that a Retry-After or a poll interval waited out in skipped
 * time has also passed for the simulator. It is synced before every activity runs (an interceptor), which is
 * the only moment a request to the simulator can happen.
 */
export class SkippedTimeClock {
  private skewMs = 0;
  constructor(private readonly env: TestWorkflowEnvironment) {}

  now = (): number => Date.now() + this.skewMs;

  async sync(): Promise<void> {
    const serverNow = await this.env.currentTimeMs();
    this.skewMs = Math.max(this.skewMs, serverNow - Date.now());
  }

  interceptor(): ActivityInterceptorsFactory {
    return () => {
      const inbound: ActivityInboundCallsInterceptor = {
        execute: async (input, next) => {
          await this.sync();
          return next(input);
        },
      };
      return { inbound };
    };
  }
}
