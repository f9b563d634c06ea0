// Command msccl-compile is the toolchain's front door: it checks, dumps and
// simulates plans, and compiles schedule programs into plans.
//
//	msccl-compile check PLAN.json
//	msccl-compile dump PLAN.json
//	msccl-compile sim PLAN.json [--size 1MiB] [--dtype f16] [--op sum] [--launches 2] [--trace out.json] [--json]
//	msccl-compile compile FILE.msccl [-D name=value ...] [-o plan.json] [--dump=PASS] [--no-verify]
//	msccl-compile plans --select algorithms/selection.yaml [-D name=value ...] --out DIR
//	msccl-compile fmt FILE.msccl...
//	msccl-compile env [MSCCL_INCLUDE]
//	msccl-compile --version
//
// Exit status: 0 when the command succeeded and the plan is valid (and, for
// sim, correct and clean), and after -h or --version; 1 when the input has
// problems; 2 on usage errors. Every error is one line on stderr.
//
// sim refuses, before allocating, a size whose simulation needs more than
// 75% of the host's MemAvailable (or $MSCCL_HOST_MEMORY, a byte count such
// as 8GiB, where set; a fixed 16GiB where /proc/meminfo is missing).
// The command owns argument parsing and presentation only: decoding and
// validation live in ir, simulation in executor/cpu, compilation in compiler.
package main
