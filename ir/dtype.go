package ir

import (
	"fmt"
	"strconv"
)

// DType is the element type of a run. Plans do not name it (one plan
// serves every type); it lives here, once, so that the CPU executor, the
// GPU kernels (whose DT_* codes kernels/abi generates from this table) and
// the commands all mean the same thing by a code.
type DType uint8

const (
	F32 DType = iota
	F16
	BF16
	I32
	U32
	U8
	F8E4M3 // OCP FP8 E4M3 (upstream's __fp8_e4m3): 4 per 32-bit word
	F8E5M2 // OCP FP8 E5M2 (upstream's __fp8_e5m2): 4 per 32-bit word

	// Symbolic is the CPU executor's fingerprint element: 8 bytes that
	// every reduction adds modulo 2^64 (executor/cpu/symbolic.go). It is
	// not a device type: DTypes omits it, ParseDType refuses it and the
	// kernels have no code for it.
	Symbolic DType = 0xff
)

var dtypeNames = [...]string{"f32", "f16", "bf16", "i32", "u32", "u8", "f8e4m3", "f8e5m2"}
var dtypeSizes = [...]int{4, 2, 2, 4, 4, 1, 1, 1}

// DTypes lists every device data type in code order.
var DTypes = []DType{F32, F16, BF16, I32, U32, U8, F8E4M3, F8E5M2}

// ParseDType maps "f32", "f16", "bf16", "i32", "u32", "u8", "f8e4m3",
// "f8e5m2" to a DType.
func ParseDType(s string) (DType, error) {
	for i, n := range dtypeNames {
		if n == s {
			return DType(i), nil
		}
	}
	return 0, fmt.Errorf("unknown data type %q (want one of f32, f16, bf16, i32, u32, u8, f8e4m3, f8e5m2)", s)
}

// Valid reports whether d is a device data type (Symbolic is not).
func (d DType) Valid() bool { return int(d) < len(dtypeNames) }

// Size is the element size in bytes (8 for Symbolic, 1 for an invalid code).
func (d DType) Size() int {
	if d == Symbolic {
		return 8
	}
	if d.Valid() {
		return dtypeSizes[d]
	}
	return 1
}

func (d DType) String() string {
	if d == Symbolic {
		return "symbolic"
	}
	if d.Valid() {
		return dtypeNames[d]
	}
	return "dtype(" + strconv.Itoa(int(d)) + ")"
}

// IsFloat reports a floating point type: reductions accumulate in f32.
func (d DType) IsFloat() bool { return d == F32 || d == F16 || d == BF16 || d.IsFP8() }

// IsFP8 reports one of the 8-bit float types.
func (d DType) IsFP8() bool { return d == F8E4M3 || d == F8E5M2 }
