package msccl

import (
	"context"
	"strings"
	"testing"

	"github.com/msccl-go/msccl-go/internal/hostid"
)

// JoinComm's own checks; joining for real is python/tests' test_comm (four
// processes through libmsccl) and runtime/comm's tests.
func TestJoinCommArguments(t *testing.T) {
	id, err := NewUniqueID()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(id, "msccl1:") {
		t.Errorf("unique id %q", id)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		id          string
		rank, world int
		device      string
		want        string
	}{
		{id, 2, 2, "cpu", "want 0 <= rank < world"},
		{id, -1, 2, "cpu", "want 0 <= rank < world"},
		{id, 0, 0, "cpu", "want 0 <= rank < world"},
		{"nonsense", 0, 2, "cpu", "does not start with \"msccl1:\""}, // described, never quoted: an id holds the secret
		{id, 0, 2, "tpu", `device "tpu"`},
	} {
		_, err := JoinComm(ctx, tc.id, tc.rank, tc.world, CommOptions{Device: tc.device})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("JoinComm(%q, %d, %d, %s) = %v, want an error containing %q", tc.id, tc.rank, tc.world, tc.device, err, tc.want)
		}
	}
}

// A rank joined by unique id names its node as the bootstrap does when it
// reads a launcher's variables (hostname and boot id), not by the bare
// host name: two containers sharing a host name are different nodes.
func TestJoinCommNodeIdentity(t *testing.T) {
	t.Setenv(hostid.NodeEnv, "")
	id, err := NewUniqueID()
	if err != nil {
		t.Fatal(err)
	}
	c, err := JoinComm(context.Background(), id, 0, 1, CommOptions{Device: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got, want := c.c.Node(0), hostid.Local().Node; got != want {
		t.Errorf("node identity %q, want the bootstrap's %q", got, want)
	}
}
