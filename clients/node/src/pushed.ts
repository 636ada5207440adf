/**
 * The answer to a push, apart from the other types so that the errors can carry a partial
 * batch's answers (`ApiError.results`) without importing them.
 *
 * @module
 */

import type { StateDto } from "./openapi.js";

/** The answer to a push. */
export interface PushResult {
  /** The job id (given or generated). */
  readonly id: string;
  /** True when this push created the job; false when a live job had the id. */
  readonly created: boolean;
  /** True when this push replaced a waiting job's body and time (`replace`, `debounce`). */
  readonly replaced: boolean;
  /** The job's state. */
  readonly state: StateDto;
  /** Its due time. */
  readonly readyAt: Date;
}
