package reference

import (
	_ "embed"
	"fmt"
	"reflect"
	"strings"
	"unsafe"

	"github.com/msccl-go/msccl-go/ir"
	"github.com/msccl-go/msccl-go/kernels"
)

//go:embed reference.cu
var cuSource string

// MaxRanks bounds the ranks a reference kernel serves (REF_MAX_RANKS).
const MaxRanks = 32

// Kernel is one reference collective.
type Kernel struct {
	Name       string
	Collective ir.Collective
	// Plan is the library algorithm it mirrors: the schedule and buffers
	// the kernel assumes.
	Plan string
	// LL: the kernel sends LL packets (its entry depends on the packet
	// width) and needs two scratch halves.
	LL   bool
	body string // the device function REF_KERNEL wraps
}

// Kernels lists every reference kernel.
var Kernels = []Kernel{
	{Name: "allreduce_oneshot_ll", Collective: ir.AllReduce, Plan: "allreduce_allpairs_packet", LL: true, body: "ref_allreduce_oneshot_ll"},
	{Name: "allreduce_twoshot", Collective: ir.AllReduce, Plan: "allreduce_twoshot", body: "ref_allreduce_twoshot"},
	{Name: "allgather_direct", Collective: ir.AllGather, Plan: "allgather_direct", body: "ref_allgather_direct"},
}

// Lookup finds a kernel by name.
func Lookup(name string) (Kernel, error) {
	var names []string
	for _, k := range Kernels {
		if k.Name == name {
			return k, nil
		}
		names = append(names, k.Name)
	}
	return Kernel{}, fmt.Errorf("no reference kernel %q (have %s)", name, strings.Join(names, ", "))
}

// Chunk is the bytes one rank's piece of the collective spans for a
// message whose input is inBytes per rank: the kernel's Args.Chunk. It
// fails for sizes the kernel's vector width does not divide (the
// reference is a yardstick, not a general implementation).
func (k Kernel) Chunk(ranks int, inBytes int64, llWidth int) (int64, error) {
	if ranks < 2 || ranks > MaxRanks {
		return 0, fmt.Errorf("reference %s: %d ranks (want 2..%d)", k.Name, ranks, MaxRanks)
	}
	chunk, unit := inBytes, int64(16)
	if k.Collective == ir.AllReduce {
		chunk = inBytes / int64(ranks)
		if chunk*int64(ranks) != inBytes {
			return 0, fmt.Errorf("reference %s: %d input bytes do not split into %d chunks", k.Name, inBytes, ranks)
		}
	}
	if k.LL {
		unit = int64(llWidth / 2)
	}
	if chunk <= 0 || chunk%unit != 0 {
		return 0, fmt.Errorf("reference %s: a chunk of %d bytes is not a positive multiple of %d", k.Name, chunk, unit)
	}
	return chunk, nil
}

// ScratchBytes is the scratch one rank needs for chunk: the two-shot's n
// slots, the LL one-shot's 2n packet slots (twice the payload) in two
// halves; the allgather needs none.
func (k Kernel) ScratchBytes(ranks int, chunk int64) int64 {
	switch {
	case k.LL:
		return 2 * 2 * int64(ranks) * 2 * chunk
	case k.Collective == ir.AllReduce:
		return int64(ranks) * chunk
	}
	return 0
}

// EntryName is the kernel's entry point for a data type and packet width.
func (k Kernel) EntryName(dt ir.DType, llWidth int) (string, error) {
	if !dt.Valid() {
		return "", fmt.Errorf("reference %s: data type %v is not supported", k.Name, dt)
	}
	if llWidth != 8 && llWidth != 16 {
		return "", fmt.Errorf("reference %s: LL packet width must be 8 or 16 bytes, got %d", k.Name, llWidth)
	}
	if k.Collective == ir.AllGather {
		return "msccl_ref_" + k.Name, nil
	}
	if k.LL {
		return fmt.Sprintf("msccl_ref_%s_%s_ll%d", k.Name, dt, llWidth), nil
	}
	return fmt.Sprintf("msccl_ref_%s_%s", k.Name, dt), nil
}

// Source is the translation unit of one entry point.
func (k Kernel) Source(dt ir.DType, llWidth int) (src, entry string, err error) {
	entry, err = k.EntryName(dt, llWidth)
	if err != nil {
		return "", "", err
	}
	asserts, err := kernels.LayoutAsserts(reflect.TypeOf(Args{}), "RefArgs")
	if err != nil {
		return "", "", err
	}
	body := k.body
	switch {
	case k.LL:
		body = fmt.Sprintf("%s<DT_%s, %d>", k.body, strings.ToUpper(dt.String()), llWidth)
	case k.Collective == ir.AllReduce:
		body = fmt.Sprintf("%s<DT_%s>", k.body, strings.ToUpper(dt.String()))
	}
	var b strings.Builder
	b.WriteString(kernels.Primitives())
	b.WriteString("// ---- reference.cu ----\n")
	b.WriteString(cuSource)
	b.WriteString("\n// ---- layout checks against executor/cuda/reference.Args ----\n")
	b.WriteString(asserts)
	// The wrapper macro cannot take a template argument list with a comma.
	fmt.Fprintf(&b, "#define REF_BODY %s\nREF_KERNEL(%s, REF_BODY)\n", body, entry)
	return b.String(), entry, nil
}

// Args mirrors struct RefArgs (c tags name its members; Source appends
// static_asserts of every offset).
type Args struct {
	In          [MaxRanks]uint64 `c:"in"`
	Out         [MaxRanks]uint64 `c:"out"`
	Scratch     [MaxRanks]uint64 `c:"scratch"`
	Arrive      [MaxRanks]uint64 `c:"arrive"`
	Epoch       uint64           `c:"epoch"`
	Done        uint64           `c:"done"`
	Watch       uint64           `c:"watch"`
	Chunk       uint64           `c:"chunk"`
	ScratchHalf uint64           `c:"scratchHalf"`
	TimeoutNs   uint64           `c:"timeoutNs"`
	Rank        uint32           `c:"rank"`
	NRanks      uint32           `c:"nranks"`
	Red         uint32           `c:"red"`
	_           uint32
}

// ArgsBytes is the size of Args on the device.
const ArgsBytes = int(unsafe.Sizeof(Args{}))

// CounterBytes is the per-rank state the host zeroes once: two arrival
// counters, the epoch and the done counter (u64 each, 16-byte aligned).
const CounterBytes = 32

// Encode lays the arguments out little-endian, as the device reads them.
func (a *Args) Encode() []byte {
	b := make([]byte, 0, ArgsBytes)
	put64 := func(v uint64) {
		b = append(b, byte(v), byte(v>>8), byte(v>>16), byte(v>>24), byte(v>>32), byte(v>>40), byte(v>>48), byte(v>>56))
	}
	for _, arr := range [][MaxRanks]uint64{a.In, a.Out, a.Scratch, a.Arrive} {
		for _, v := range arr {
			put64(v)
		}
	}
	for _, v := range []uint64{a.Epoch, a.Done, a.Watch, a.Chunk, a.ScratchHalf, a.TimeoutNs} {
		put64(v)
	}
	for _, v := range []uint32{a.Rank, a.NRanks, a.Red, 0} {
		b = append(b, byte(v), byte(v>>8), byte(v>>16), byte(v>>24))
	}
	return b
}
