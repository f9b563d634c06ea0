package main

import (
	"os"
	"runtime/debug"
	"testing"
)

func TestTuneGC(t *testing.T) {
	for _, tc := range []struct {
		name string
		gogc string // "" unsets GOGC
		want int
	}{
		{"unset", "", gcPercent},
		{"user's choice kept", "100", 77},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("GOGC", tc.gogc)
			if tc.gogc == "" {
				os.Unsetenv("GOGC") // t.Setenv restores it afterwards
			}
			prev := debug.SetGCPercent(77)
			tuneGC()
			if got := debug.SetGCPercent(prev); got != tc.want {
				t.Errorf("GC percent after tuneGC = %d, want %d", got, tc.want)
			}
		})
	}
}
