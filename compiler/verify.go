package compiler

import (
	"fmt"
	"runtime"
	"strings"
	"sync"

	"github.com/msccl-go/msccl-go/dsl"
	"github.com/msccl-go/msccl-go/executor/cpu"
	"github.com/msccl-go/msccl-go/ir"
)

// Verify runs the CPU reference executor on p for every message size and
// data type given (nil sizes: ProofSizes, which cover every size the
// plan's rule admits; ProofLaunches launches each, so buffer and scratch
// reuse across launches is checked) and reports every deadlock, race, unbalanced signal and wrong
// result at the DSL source of the ops involved. An empty result means the
// plan is proven correct for those sizes and types. sm may be nil (plans
// not compiled from source); findings then carry plan paths only.
func Verify(p *ir.Plan, sm *SourceMap, sizes []int64, dtypes []cpu.DType) Diagnostics {
	var ds Diagnostics
	seen := map[string]bool{}
	add := func(d dsl.Diagnostic) {
		k := d.String()
		if !seen[k] {
			seen[k] = true
			ds = append(ds, d)
		}
	}
	if sizes == nil {
		var err error
		if sizes, err = ProofSizes(p); err != nil {
			add(dsl.Diagnostic{Severity: dsl.Error, Summary: "the plan serves no message size: " + err.Error(), Subject: sm.header()})
			return ds
		}
	}
	// The runs are independent simulations of a plan they only read, so
	// they go in parallel, one per processor; findings are merged in the
	// order of the runs, as if they had run one after another.
	type run struct {
		size int64
		dt   cpu.DType
		rep  *cpu.Report
		err  error
	}
	var runs []run
	for _, size := range sizes {
		for _, dt := range dtypes {
			runs = append(runs, run{size: size, dt: dt})
		}
	}
	par := min(runtime.GOMAXPROCS(0), len(runs))
	if par <= 1 {
		for i := range runs {
			runs[i].rep, runs[i].err = cpu.Run(p, cpu.Options{Size: runs[i].size, DType: runs[i].dt, Launches: ProofLaunches})
		}
	} else {
		var wg sync.WaitGroup
		next := make(chan int)
		for w := 0; w < par; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range next {
					runs[i].rep, runs[i].err = cpu.Run(p, cpu.Options{Size: runs[i].size, DType: runs[i].dt, Launches: ProofLaunches})
				}
			}()
		}
		for i := range runs {
			next <- i
		}
		close(next)
		wg.Wait()
	}
	// The same finding at several sizes and types is one finding: the
	// first run's report stands, and the runs that repeat it are listed.
	// Wrong results differ in byte offsets from size to size, so only the
	// first run that has them reports them.
	also := map[string][]string{}
	first := map[string]int{}
	wrongRun := ""
	for _, r := range runs {
		run := fmt.Sprintf("%d bytes, %s", r.size, r.dt)
		if r.err != nil {
			add(dsl.Diagnostic{Severity: dsl.Error, Summary: fmt.Sprintf("cannot simulate at %d bytes of %s: %v", r.size, r.dt, r.err), Subject: sm.header()})
			continue
		}
		for _, d := range reportDiags(r.rep, sm, run) {
			if strings.HasPrefix(d.Summary, "wrong result") {
				if wrongRun != "" && wrongRun != run {
					also["wrong"] = appendNew(also["wrong"], run)
					continue
				}
				wrongRun = run
			}
			k := fmt.Sprintf("%s@%v", d.Summary, d.Subject.Start)
			if i, ok := first[k]; ok && ds[i].Detail != d.Detail {
				also[k] = appendNew(also[k], run)
				continue
			}
			if _, ok := first[k]; !ok {
				first[k] = len(ds)
			}
			add(d)
		}
	}
	for k, runs := range also {
		if k == "wrong" {
			for i := range ds {
				if strings.HasPrefix(ds[i].Summary, "wrong result") {
					ds[i].Detail += "; also wrong at " + foldRuns(runs)
					break
				}
			}
			continue
		}
		ds[first[k]].Detail += "; the same at " + foldRuns(runs)
	}
	ds.Sort()
	return ds
}

func appendNew(l []string, s string) []string {
	for _, x := range l {
		if x == s {
			return l
		}
	}
	return append(l, s)
}

// foldRuns lists at most three runs and counts the rest.
func foldRuns(runs []string) string {
	if len(runs) <= 3 {
		return strings.Join(runs, "; ")
	}
	return fmt.Sprintf("%s and %d more runs", strings.Join(runs[:3], "; "), len(runs)-3)
}

func reportDiags(rep *cpu.Report, sm *SourceMap, run string) Diagnostics {
	var ds Diagnostics
	at := func(pl cpu.Place) (dsl.Range, string) {
		if r, ok := sm.Range(pl.Rank, pl.Block, pl.Op, pl.Inner); ok {
			return r, fmt.Sprintf("%s at %s", pl, r.Start)
		}
		return sm.header(), pl.String()
	}
	for _, s := range rep.Deadlocks {
		r, where := at(s.Place)
		ds = append(ds, dsl.Diagnostic{Severity: dsl.Error, Summary: fmt.Sprintf("deadlock: rank %d block %d waits forever (%s)", s.Rank, s.Block, s.Waiting),
			Detail: fmt.Sprintf("stuck op %s; run %s", where, run), Subject: r})
	}
	for _, rc := range rep.Races {
		ra, wa := at(rc.A.Place)
		_, wb := at(rc.B.Place)
		ds = append(ds, dsl.Diagnostic{Severity: dsl.Error, Summary: fmt.Sprintf("race on rank %d's %s bytes [%d:%d)", rc.A.BufferRank, rc.A.Buffer.Long(), max(rc.A.Off, rc.B.Off), min(rc.A.End, rc.B.End)),
			Detail: fmt.Sprintf("%s %s; unordered with %s %s; run %s", rw(rc.A.Write), wa, rw(rc.B.Write), wb, run), Subject: ra})
	}
	for _, u := range rep.Unbalanced {
		r, where := at(u.Place)
		ds = append(ds, dsl.Diagnostic{Severity: dsl.Error, Summary: fmt.Sprintf("signal never waited for (%s, %d token(s) left)", u.Channel, u.Count),
			Detail: fmt.Sprintf("%s; add the matching wait on the peer or drop the signal", where), Subject: r})
	}
	for i, m := range rep.Wrong {
		if i == 3 {
			break // the first few say enough; the total is in the detail
		}
		ds = append(ds, dsl.Diagnostic{Severity: dsl.Error, Summary: fmt.Sprintf("wrong result: rank %d output byte %d is %s, want %s (launch %d)", m.Rank, m.Off, m.Got, m.Want, m.Launch),
			Detail: fmt.Sprintf("%d wrong elements in all; run %s", rep.WrongTotal, run), Subject: sm.header()})
	}
	if len(ds) == 0 && !rep.OK() {
		ds = append(ds, dsl.Diagnostic{Severity: dsl.Error, Summary: "verdict: " + rep.Verdict.String(), Detail: run, Subject: sm.header()})
	}
	return ds
}

func rw(w bool) string {
	if w {
		return "write by"
	}
	return "read by"
}
