/** An admin operation's input was wrong; the message names the option and the rule. */
export class AdminError extends Error {
  override name = 'AdminError';
}
