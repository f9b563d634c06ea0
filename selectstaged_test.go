package msccl

import "testing"

// A communicator pads a size outside the rule (capi), so its selection
// takes the row covering an awkward size where SelectPlan refuses it.
func TestSelectPlanStaged(t *testing.T) {
	for _, tc := range []struct {
		coll string
		size int64
	}{{"allreduce", 4}, {"allreduce", 4004}, {"allreduce", 4000012}, {"allgather", 16}, {"reducescatter", 16000048}, {"alltoall", 16}} {
		p, err := SelectPlanStaged("", tc.coll, 4, tc.size)
		if err != nil {
			t.Errorf("%s %d: %v", tc.coll, tc.size, err)
			continue
		}
		rule, err := p.SizeRule()
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := rule.Next(tc.size); !ok || string(p.Collective) != tc.coll {
			t.Errorf("%s %d: %s (%s) cannot serve it", tc.coll, tc.size, p.Name, rule)
		}
		if !rule.Admits(tc.size) {
			if _, err := SelectPlan("", tc.coll, 4, tc.size); err == nil {
				t.Errorf("%s %d: SelectPlan took a size outside %s's rule", tc.coll, tc.size, p.Name)
			}
		}
	}
	if _, err := SelectPlanStaged("", "allreduce", 4, 0); err == nil {
		t.Error("size 0 accepted")
	}
}
