/**
 * jobhook for Express (4 and 5), Connect and node:http.
 * @packageDocumentation
 */
import type { VerifiedDelivery } from './lib/core/verify/core.js';

export type { ExpressReceiverOptions, NodeHandler } from './lib/adapters/express.js';
export type { MiddlewareOptions } from './lib/adapters/middleware.js';
export type { NextFunction } from './lib/adapters/node-http.js';
export type { NodeWebhookRequest } from './lib/adapters/node-http.js';
export { keepRawBody } from './lib/adapters/node-http.js';
export { createParserErrorHandler } from './lib/adapters/parser-errors.js';
export type { ErrorHandler, ParserErrorOptions } from './lib/adapters/parser-errors.js';

declare global {
  namespace Express {
    interface Request {
      /** The verified delivery, set by jobhook's `createMiddleware`. */
      webhook?: VerifiedDelivery;
    }
  }
}

export { createNodeReceiver as createReceiver } from './lib/adapters/express.js';
export { createNodeMiddleware as createMiddleware } from './lib/adapters/middleware.js';
