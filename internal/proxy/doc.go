// Package proxy is the interface between a port channel's host proxy and
// the code that serves its requests: the proxy pops each request (a
// Trigger) from its rank's queue, in order, and hands it to a Handler.
// The built-in copy, signal and flush handling is Default; a user's
// handler wraps it (to count, time or log) or replaces it (to copy
// through a staging buffer, reduce on the host, ...). The root package
// re-exports these names (msccl.ProxyHandler, msccl.Trigger, ...).
//
// It owns no queue and no memory: the proxies (executor/host's for the
// cpu device) build Triggers and call Serve. It must not import them.
package proxy
