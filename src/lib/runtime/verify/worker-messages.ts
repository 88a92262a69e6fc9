/** The messages between the worker pool and its verification workers. */
import type { Plan } from '../../core/verify/split.js';

/** What the main thread sends: the body, and what the keys that opened its signature say was signed. */
export interface WorkerRequest {
  id: number;
  body: Uint8Array;
  opened: Array<{ keyIndex: number; hash: Uint8Array }>;
}

/** What the worker answers. */
export type WorkerResponse = { id: number; body: Uint8Array } & (
  | {
      ok: {
        dialect: string;
        keyIndex: number;
        canonicalSha256: string;
        plan: Plan | undefined;
        rawSha256: string;
      };
    }
  | {
      error: {
        code?: string;
        name: string;
        message: string;
        offset?: number;
        limit?: number;
        reason?: string;
      };
    }
);
