package diag

// The stable codes. A code names a kind of problem, not its wording:
// callers (the compiler's checker between passes, Verify folding the same
// finding over runs, tools reading --json) branch on these and never on
// the text. A code is `phase.kind`; once released it keeps its meaning.
const (
	// The language (dsl).
	CodeSyntax   = "dsl.syntax" // the source does not parse
	CodeInternal = "internal"   // a bug of the toolchain reported as a diagnostic instead of a crash

	// The compiler. A problem found while evaluating or lowering the
	// program carries the code of the pass that found it (compile.evaluate,
	// compile.lower, ...: CompilePass); those below are more specific.
	CodeUnknownPass   = "compile.unknown-pass"   // --dump names no pass
	CodeNoProgram     = "compile.no-program"     // Compile got no file
	CodeRequireFailed = "compile.require-failed" // a require statement does not hold for the parameters
	CodeNoSize        = "compile.no-size"        // the plan serves no message size

	// The plan (ir): decoding and validation.
	CodePlanSyntax     = "plan.syntax"     // malformed JSON
	CodePlanSchema     = "plan.schema"     // JSON that is not the plan schema: unknown key or op, wrong type
	CodePlanInvalid    = "plan.invalid"    // a plan that breaks a structural rule
	CodePlanSuspicious = "plan.suspicious" // legal but probably not meant (warnings)
	CodeUnsignaledWait = "sync.unsignaled-wait"

	// The upstream executor's fixed table sizes (IsLimit).
	CodeOpsPerBlock           = limitPrefix + "ops-per-block"
	CodeChannelsPerBlock      = limitPrefix + "channels-per-block"
	CodeRemoteBuffersPerBlock = limitPrefix + "remote-buffers-per-block"
	CodeChannelsPerOp         = limitPrefix + "channels-per-op"
	CodeRefsPerOp             = limitPrefix + "refs-per-op"
	CodeSemaphoresPerOp       = limitPrefix + "semaphores-per-op"

	// The proof (executor/cpu's findings, and Verify's account of them).
	CodeDeadlock       = "proof.deadlock"        // a block waits forever
	CodeRace           = "proof.race"            // two accesses the plan leaves unordered
	CodeUnbalanced     = "proof.unbalanced"      // a signal or release nothing consumes
	CodeWrongResult    = "proof.wrong-result"    // an output differs from the collective's definition
	CodeInputClobbered = "proof.input-clobbered" // an out-of-place collective changed its input
	CodeCannotRun      = "proof.cannot-run"      // the CPU executor refused to run the plan

	// The executors' errors (Coded, CodeOf): refusals a caller may act
	// on, by changing what it asks for rather than the plan.
	CodeBadOptions  = "exec.options"      // an option the executor does not take: data type, reduction, launches, packet width, FIFO size
	CodeSizeRefused = "exec.size"         // a message size the plan does not serve (its size rule, or a piece of no whole elements)
	CodeUnsupported = "exec.unsupported"  // a valid plan that this executor cannot run (an op, channel or layout it lacks)
	CodeNotResident = "exec.not-resident" // the plan's blocks, which wait on each other, do not fit on the device at once
	CodeWatchdog    = "exec.watchdog"     // a wait ran past the timeout: the watchdog stopped the launch (HangError)
	CodeBroken      = "exec.broken"       // the executor is closed or its buffers freed, or it is unusable after an earlier failure
	CodeRanks       = "exec.ranks"        // the plan is for another number of ranks than the job, or than the buffers given
	CodeFailed      = "exec.failed"       // a run that failed for a reason no code above names (a file, a driver call, a peer): FromError's fallback
)

const limitPrefix = "limit."

// CompilePass is the code of a problem found by the compiler pass named
// pass (see compiler.PassNames).
func CompilePass(pass string) string { return "compile." + pass }

// Codes lists every fixed code with what it means, for docs and for the
// test that keeps them unique.
var Codes = []struct{ Code, Meaning string }{
	{CodeSyntax, "the source does not parse"},
	{CodeInternal, "a toolchain bug, reported instead of a crash"},
	{CodeUnknownPass, "--dump names no pass"},
	{CodeNoProgram, "no program to compile"},
	{CodeRequireFailed, "a require statement does not hold"},
	{CodeNoSize, "the plan serves no message size"},
	{CodePlanSyntax, "malformed plan JSON"},
	{CodePlanSchema, "JSON that is not the plan schema"},
	{CodePlanInvalid, "a plan breaking a structural rule"},
	{CodePlanSuspicious, "a legal plan that is probably not meant (warning)"},
	{CodeUnsignaledWait, "a wait no op signals"},
	{CodeOpsPerBlock, "more ops in a block than upstream holds"},
	{CodeChannelsPerBlock, "more channels in a block than upstream holds"},
	{CodeRemoteBuffersPerBlock, "more remote buffers in a block than upstream holds"},
	{CodeChannelsPerOp, "more channels on one op than upstream holds"},
	{CodeRefsPerOp, "more buffer references on one op than upstream holds"},
	{CodeSemaphoresPerOp, "more semaphores on one op than upstream holds"},
	{CodeDeadlock, "a block waits forever"},
	{CodeRace, "two accesses left unordered"},
	{CodeUnbalanced, "a signal nothing waits for"},
	{CodeWrongResult, "an output differs from the collective's definition"},
	{CodeInputClobbered, "an out-of-place collective changed its input"},
	{CodeCannotRun, "the CPU executor refused to run the plan"},
	{CodeBadOptions, "an executor option out of range"},
	{CodeSizeRefused, "a message size the plan does not serve"},
	{CodeUnsupported, "a plan this executor cannot run"},
	{CodeNotResident, "blocks that wait on each other do not fit at once"},
	{CodeWatchdog, "a wait ran past the watchdog's timeout"},
	{CodeBroken, "the executor is closed or broken, or its buffers freed"},
	{CodeRanks, "a plan for another number of ranks than the job"},
	{CodeFailed, "a run failed for a reason no other code names"},
}
