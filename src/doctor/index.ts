/** `imagebatch doctor`: checks of the service with the worker's settings, and its paid test. No Temporal here. */
export * from './checks';
