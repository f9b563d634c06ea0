package msccl

import proxyapi "github.com/msccl-go/msccl-go/internal/proxy"

// The port channels' host proxy calls a ProxyHandler for every request
// it pops from a rank's queue, in order (docs/primitives.md). A handler
// wraps DefaultProxyHandler to observe (ProxyCounter) or replaces it to
// move the data its own way (ProxyAddF32); Options.ProxyHandler installs
// one.
type (
	// ProxyHandler serves port-channel triggers.
	ProxyHandler = proxyapi.Handler
	// ProxyHandlerFunc adapts a function to ProxyHandler.
	ProxyHandlerFunc = proxyapi.HandlerFunc
	// Trigger is one request as the proxy pops it; Trigger.Default does
	// the built-in copy and signal, Trigger.RaiseSignal the signal alone.
	Trigger = proxyapi.Trigger
	// TriggerKind says what a trigger asks: TriggerPut, TriggerSignal or both.
	TriggerKind = proxyapi.Kind
	// TriggerResult is a handler's answer; an Err fails the run.
	TriggerResult = proxyapi.Result
	// DefaultProxyHandler is the built-in handling.
	DefaultProxyHandler = proxyapi.DefaultHandler
	// ProxyCounter counts triggers, bytes and latency per peer around
	// another handler.
	ProxyCounter = proxyapi.Counter
	// ProxyPeerStats are a ProxyCounter's figures for one peer.
	ProxyPeerStats = proxyapi.PeerStats
	// ProxyAddF32 adds each put into its destination (float32) through a
	// staging buffer instead of overwriting it: a host-side reduction.
	ProxyAddF32 = proxyapi.AddF32
)

// The kinds of a Trigger.
const (
	TriggerPut    = proxyapi.Put
	TriggerSignal = proxyapi.Signal
)
