import type { CompleteReply, RenewReply } from './model.js';

/** A store's `complete` answer; stores written for earlier versions answer true or false. */
export function completeReply(reply: CompleteReply | boolean): CompleteReply {
  if (reply === true) return 'completed';
  if (reply === false) return 'superseded';
  return reply;
}

/** A store's `renew` answer; stores written for earlier versions answer true or false. */
export function renewReply(reply: RenewReply | boolean): RenewReply {
  if (reply === true) return 'renewed';
  if (reply === false) return 'superseded';
  return reply;
}
