// Package intset holds the small set operations on []int that the plan
// validator (ir) and the compiler's sync fusion both need: a channel list
// or a rank group is a set written as a slice. It owns nothing else and
// imports nothing of the module.
package intset
