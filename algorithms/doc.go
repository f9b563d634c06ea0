// Package algorithms is the library of schedules: the .msccl programs in
// this folder and selection.yaml, which says which one runs a collective
// for a world and a message size. They are embedded, so a program built
// from this module (or installed with go install) finds them from any
// directory, with no checkout on disk.
//
// The package only holds data and reads it through the compiler; it must
// not reach the executors or the runtime.
package algorithms
