package cudaexec

// firstErr is for teardown that goes on past a failure, so that
// everything it can free is freed, and reports the first error (the
// later ones are usually its consequences).
type firstErr struct{ err error }

// keep records err unless it is nil or an error came before.
func (f *firstErr) keep(err error) {
	if err != nil && f.err == nil {
		f.err = err
	}
}
