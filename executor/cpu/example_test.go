package cpu_test

import (
	"fmt"
	"os"

	"github.com/msccl-go/msccl-go/executor/cpu"
	"github.com/msccl-go/msccl-go/ir"
)

// Run a plan at 1 MiB in f16 and check it on two back-to-back launches.
func ExampleRun() {
	data, err := os.ReadFile("../../testdata/peer-plans/allreduce_packet.json")
	if err != nil {
		fmt.Println(err)
		return
	}
	p, _, err := ir.Load(data)
	if err != nil {
		fmt.Println(err)
		return
	}
	rep, err := cpu.Run(p, cpu.Options{Size: 1 << 20, DType: cpu.F16, Reduce: ir.ReduceMax})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(rep)
	// Output: verdict: correct
}

// A plan whose rank 0 unpacks packets nobody sends deadlocks; the report
// says where and what for.
func ExampleReport_String() {
	data, _ := os.ReadFile("../../testdata/broken/sim/packet_unwritten.json")
	p, _, _ := ir.Load(data)
	rep, _ := cpu.Run(p, cpu.Options{Size: 256, DType: cpu.I32, Launches: 1})
	fmt.Print(rep)
	// Output:
	// verdict: deadlock
	// deadlock: gpus[0].threadblocks[2].ops[0] (upkt) waits for packets with flag 1 at rank 0 scratch half 0 payload byte 256 (packet byte 512) of [256:384), which nobody has written this launch (launch 0)
}
