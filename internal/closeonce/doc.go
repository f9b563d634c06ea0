// Package closeonce is the Close of an object that other methods refuse
// to use once closed: under the object's own mutex, the first Close marks
// it closed and releases what it holds; a later one does nothing and
// returns nil. The CUDA and CPU executors and the CUDA device's memory
// and device all close so. It imports nothing of the module.
package closeonce
