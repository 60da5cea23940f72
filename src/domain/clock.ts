/** Source of the current time in epoch milliseconds; injected so tests can move time. */
export type Clock = () => number;
