package compiler

import (
	"reflect"

	"github.com/msccl-go/msccl-go/dsl"
)

// passes is the pipeline, in order. Each lives in its own pass_*.go file
// and is a typed function of the value it takes to the value it returns
// (step), or rewrites the value it takes (rewrite); each pass takes what
// the one before returned (TestPassChain). What every pass may touch
// besides that value is the state (state.go): the program, options and
// diagnostics.
var passes = []pass{
	step("evaluate", "run params, let, for and if; check names, ranks and chunk ranges",
		func(st *state, _ *dsl.File) *evaluated { return evaluate(st) }), // the state's file
	step("lower", "turn chunk moves into plan ops and pick channel types", lower),
	rewrite("assign-tbs", "place every op on a thread block of its rank", assignTBs),
	rewrite("instances", "replicate blocks and split chunks for option instances", replicate),
	rewrite("fuse", "merge reduce chains, reduce+send (res, rres, respkt, recpkt, recspkt) and multi-peer puts",
		func(_ *state, p *program) { fuse(p) }),
	// Sync and channel building are one pass: sync's result is no form of
	// its own (a dump after it showed fuse's actions unchanged), only what
	// channel building reads, and for chunk-level programs sync lays each
	// block out while the plan is written.
	step("sync", "insert nop, signal/wait, semaphores and flushes from data dependencies; allocate and pair channels, remote buffers, semaphores; build the plan", syncAndBuild),
	rewrite("fuse-sync", "merge multi-channel signal/wait, put+signal(+flush) into pws/pwsf, drop redundant nops",
		func(_ *state, b *built) { fuseSync(b) }),
	rewrite("limits", "check the plan against the executor's structural rules and limits", checkLimits),
}

// pass is one named step of the pipeline. run is the pass's own function
// behind the one signature the table needs; in and out are the types of
// what it takes and returns, which step and rewrite read off that
// function, so the table cannot say one thing and the function do another.
type pass struct {
	name, doc string
	in, out   reflect.Type
	run       func(*state, any) any
}

// step is the pass of f, which consumes one form and returns the next.
func step[In, Out any](name, doc string, f func(*state, In) Out) pass {
	return pass{name: name, doc: doc, in: reflect.TypeFor[In](), out: reflect.TypeFor[Out](),
		run: func(st *state, v any) any { return f(st, v.(In)) }}
}

// rewrite is the pass of f, which changes the form it takes in place.
func rewrite[T any](name, doc string, f func(*state, T)) pass {
	t := reflect.TypeFor[T]()
	return pass{name: name, doc: doc, in: t, out: t,
		run: func(st *state, v any) any { f(st, v.(T)); return v }}
}
