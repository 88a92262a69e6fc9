/**
 * `jobhook` as bundlers for edge runtimes see it (conditions workerd, edge-light,
 * browser, worker): everything runtime-neutral, and the Node-only functions as stubs
 * that say where their WebCrypto twins are. Types are those of the Node entry.
 * @packageDocumentation
 */
export * from './lib/entries/neutral-api.js';

function nodeOnly(name: string, instead: string): never {
  throw new TypeError(`jobhook: ${name} needs node:crypto, which this runtime lacks; use ${instead}`);
}

/** Needs node:crypto: use `createVerifier` from `jobhook/web` here. */
export function createVerifier(): never {
  return nodeOnly('createVerifier', "createVerifier from 'jobhook/web' (async)");
}
/** Needs node:crypto: use `createReceiver` from `jobhook/web` here. */
export function createReceiver(): never {
  return nodeOnly('createReceiver', "createReceiver from 'jobhook/web' (Request → Response)");
}
/** Needs node:crypto: use `createVerifier` from `jobhook/web` here. */
export function verifyWebhook(): never {
  return nodeOnly('verifyWebhook', "createVerifier from 'jobhook/web'");
}
/** Needs node:crypto. */
export function signDelivery(): never {
  return nodeOnly('signDelivery', 'it on Node (jobhook/testing)');
}
