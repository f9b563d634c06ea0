package bootstrap

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

func envOf(kv ...string) func(string) string {
	m := map[string]string{}
	for _, s := range kv {
		k, v, _ := strings.Cut(s, "=")
		m[k] = v
	}
	return func(k string) string { return m[k] }
}

func TestFromEnv(t *testing.T) {
	hostname = func() (string, error) { return "thishost", nil }
	t.Cleanup(func() { hostname = osHostname })
	id := UniqueID{Addr: "10.0.0.1:4567", Secret: [16]byte{1, 2, 3}}
	tests := []struct {
		name string
		env  []string
		want Config // Secret compared only when set
		src  string
	}{
		{"single process", nil, Config{Rank: 0, World: 1, LocalRank: 0, LocalWorld: 1, Node: "thishost", ID: UniqueID{Addr: "127.0.0.1:0"}, ListenAddr: "127.0.0.1:0"}, "single process"},
		{"torchrun", []string{"RANK=3", "WORLD_SIZE=8", "LOCAL_RANK=1", "LOCAL_WORLD_SIZE=2", "MASTER_ADDR=gpu1", "MASTER_PORT=29500", "TORCHELASTIC_RUN_ID=abc", "MSCCL_SECRET=s"},
			Config{Rank: 3, World: 8, LocalRank: 1, LocalWorld: 2, Node: "thishost", ID: UniqueID{Addr: "gpu1:29501", Secret: secretFrom("msccl-secret-v1", "s")}}, "torchrun, MSCCL_SECRET"},
		{"openmpi one host", []string{"OMPI_COMM_WORLD_RANK=2", "OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_LOCAL_RANK=2", "OMPI_COMM_WORLD_LOCAL_SIZE=4", "PMIX_NAMESPACE=prterun-x-1@1", "OMPI_MCA_orte_precondition_transports=0123456789abcdef-fedcba9876543210"},
			Config{Rank: 2, World: 4, LocalRank: 2, LocalWorld: 4, Node: "thishost", ID: UniqueID{Addr: "127.0.0.1:" + itoa(derivedPort("prterun-x-1@1"))}}, "openmpi, the launcher's per-job key"},
		{"slurm", []string{"SLURM_PROCID=5", "SLURM_NTASKS=8", "SLURM_LOCALID=1", "SLURM_NODEID=2", "SLURM_STEP_TASKS_PER_NODE=2(x3),2", "SLURM_STEP_NODELIST=gpu[07-10]", "SLURM_JOB_ID=77", "SLURM_STEP_ID=0", "SLURMD_NODENAME=gpu09", "MSCCL_SECRET=s"},
			Config{Rank: 5, World: 8, LocalRank: 1, LocalWorld: 2, Node: "gpu09", ID: UniqueID{Addr: "gpu07:" + itoa(derivedPort("77.0"))}}, "slurm, MSCCL_SECRET"},
		{"torchrun under slurm", []string{"RANK=1", "WORLD_SIZE=2", "MASTER_ADDR=h", "MASTER_PORT=100", "SLURM_PROCID=0", "SLURM_NTASKS=1", "MSCCL_SECRET=s", "MSCCL_BOOTSTRAP_LISTEN=:101"},
			Config{Rank: 1, World: 2, LocalRank: -1, LocalWorld: -1, Node: "thishost", ID: UniqueID{Addr: "h:101"}, ListenAddr: ":101"}, "torchrun, MSCCL_SECRET"},
		{"msccl overrides", []string{"RANK=1", "WORLD_SIZE=2", "MASTER_ADDR=h", "MASTER_PORT=100", "MSCCL_RANK=0", "MSCCL_WORLD_SIZE=3", "MSCCL_NODE=n7", "MSCCL_BOOTSTRAP_TIMEOUT=90s", "MSCCL_UNIQUE_ID=" + id.String()},
			Config{Rank: 0, World: 3, LocalRank: -1, LocalWorld: -1, Node: "n7", ID: id, Timeout: 90 * time.Second}, "torchrun, MSCCL_UNIQUE_ID"},
		{"msccl alone", []string{"MSCCL_RANK=1", "MSCCL_WORLD_SIZE=2", "MSCCL_BOOTSTRAP_ADDR=[::1]:999", "MSCCL_SECRET=pass", "MSCCL_BOOTSTRAP_TIMEOUT=2.5"},
			Config{Rank: 1, World: 2, LocalRank: -1, LocalWorld: -1, Node: "thishost", ID: UniqueID{Addr: "[::1]:999", Secret: secretFrom("msccl-secret-v1", "pass")}, Timeout: 2500 * time.Millisecond}, "msccl, MSCCL_SECRET"},
		{"one rank", []string{"MSCCL_RANK=0", "MSCCL_WORLD_SIZE=1"},
			Config{Rank: 0, World: 1, LocalRank: -1, LocalWorld: -1, Node: "thishost", ID: UniqueID{Addr: "127.0.0.1:0"}, ListenAddr: "127.0.0.1:0"}, "msccl"},
		{"id file", []string{"MSCCL_RANK=1", "MSCCL_WORLD_SIZE=2", "MSCCL_UNIQUE_ID_FILE=/tmp/x"},
			Config{Rank: 1, World: 2, LocalRank: -1, LocalWorld: -1, Node: "thishost", IDFile: "/tmp/x"}, "msccl, MSCCL_UNIQUE_ID_FILE"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := fromEnv(envOf(tc.env...))
			if err != nil {
				t.Fatal(err)
			}
			if tc.want.Timeout == 0 {
				tc.want.Timeout = DefaultTimeout
			}
			if tc.want.ID.Secret == ([16]byte{}) {
				tc.want.ID.Secret = got.ID.Secret
				if got.ID.Secret == ([16]byte{}) && tc.want.IDFile == "" {
					t.Errorf("no secret")
				}
			}
			tc.want.Source = tc.src
			if got != tc.want {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// A launcher's own per-job key (Open MPI's) gives every rank of the job
// the same secret and other jobs another; the job's public identity alone
// (torchrun's run id, Slurm's job id) gives none: the job is refused,
// saying how to set one.
func TestLauncherSecret(t *testing.T) {
	ompi := func(rank, key string) [16]byte {
		c, err := fromEnv(envOf("OMPI_COMM_WORLD_RANK="+rank, "OMPI_COMM_WORLD_SIZE=2", "OMPI_COMM_WORLD_LOCAL_SIZE=2", "PMIX_NAMESPACE=j", "OMPI_MCA_opal_precondition_transports="+key))
		if err != nil {
			t.Fatal(err)
		}
		return c.ID.Secret
	}
	if ompi("0", "a-b") != ompi("1", "a-b") {
		t.Error("ranks of one job get different secrets")
	}
	if ompi("0", "a-b") == ompi("0", "a-c") {
		t.Error("two jobs with different keys get the same secret")
	}
	for _, env := range [][]string{
		{"RANK=0", "WORLD_SIZE=2", "MASTER_ADDR=h", "MASTER_PORT=100", "TORCHELASTIC_RUN_ID=u1", "TORCHELASTIC_RESTART_COUNT=0"},
		{"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=2", "OMPI_COMM_WORLD_LOCAL_SIZE=2", "PMIX_NAMESPACE=j"},
		{"SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_STEP_NODELIST=n1", "SLURM_JOB_ID=7", "SLURM_STEP_ID=0"},
	} {
		_, err := fromEnv(envOf(env...))
		if err == nil || !strings.Contains(err.Error(), "no secret") || !strings.Contains(err.Error(), "MSCCL_SECRET") {
			t.Errorf("%v: %v, want a refusal naming MSCCL_SECRET", env, err)
		}
	}
}

func TestFromEnvErrors(t *testing.T) {
	tests := []struct {
		env  []string
		want string
	}{
		{[]string{"RANK=x", "WORLD_SIZE=2"}, `RANK="x"`},
		{[]string{"RANK=2", "WORLD_SIZE=2", "MASTER_ADDR=h", "MASTER_PORT=1"}, "rank 2 of world size 2"},
		{[]string{"MSCCL_RANK=0"}, "MSCCL_RANK and MSCCL_WORLD_SIZE"},
		{[]string{"MSCCL_RANK=0", "MSCCL_WORLD_SIZE=2"}, "MSCCL_BOOTSTRAP_ADDR"},
		{[]string{"MSCCL_RANK=0", "MSCCL_WORLD_SIZE=2", "MSCCL_BOOTSTRAP_ADDR=h:1"}, "MSCCL_SECRET"},
		{[]string{"MSCCL_RANK=0", "MSCCL_WORLD_SIZE=2", "MSCCL_UNIQUE_ID=nope"}, "MSCCL_UNIQUE_ID"},
		{[]string{"MSCCL_RANK=0", "MSCCL_WORLD_SIZE=2", "MSCCL_BOOTSTRAP_TIMEOUT=-3"}, "MSCCL_BOOTSTRAP_TIMEOUT"},
		{[]string{"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_LOCAL_SIZE=2", "PMIX_NAMESPACE=j"}, "does not say where rank 0 runs"},
		{[]string{"RANK=0", "WORLD_SIZE=2", "LOCAL_RANK=3", "LOCAL_WORLD_SIZE=2", "MASTER_ADDR=h", "MASTER_PORT=1"}, "local rank 3"},
	}
	for _, tc := range tests {
		_, err := fromEnv(envOf(tc.env...))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one mentioning %q", tc.env, err, tc.want)
		}
	}
}

func TestUniqueIDRoundTrip(t *testing.T) {
	for _, host := range []string{"127.0.0.1", ""} {
		id, err := NewUniqueID(host)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseUniqueID(id.String())
		if err != nil || back != id {
			t.Errorf("%s: parsed back %+v, %v", id, back, err)
		}
	}
	v6 := UniqueID{Addr: "[::1]:80", Secret: [16]byte{0xff}}
	if back, err := ParseUniqueID(v6.String()); err != nil || back != v6 {
		t.Errorf("%s: parsed back %+v, %v", v6, back, err)
	}
	for _, bad := range []string{"", "msccl1:", "msccl1:h:1:zz", "msccl1:h:0:00000000000000000000000000000000", "msccl2:h:1:00000000000000000000000000000000", "msccl1:h:1:00"} {
		if _, err := ParseUniqueID(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	// The id is a credential: however it is malformed, the error quotes
	// no part of it (a misplaced colon moves the secret into the address).
	const secret = "0123456789abcdef0123456789abcdef"
	for _, bad := range []string{secret, "msccl1:" + secret, "msccl1:h:1:" + secret + ":", "msccl1:h:1:" + secret + "0", "mscc1:h:1:" + secret, "msccl1:h:x" + secret + ":00"} {
		_, err := ParseUniqueID(bad)
		if err == nil || strings.Contains(err.Error(), secret[:8]) {
			t.Errorf("ParseUniqueID(%q): %v", bad, err)
		}
	}
}

func TestSlurmHelpers(t *testing.T) {
	for in, want := range map[string]string{"gpu[03-05,9],cpu1": "gpu03", "a,b": "a", "n[1]x": "n1x", "solo": "solo"} {
		if got := firstHost(in); got != want {
			t.Errorf("firstHost(%q) = %q, want %q", in, got, want)
		}
	}
	got, err := tasksPerNode("4(x2),3")
	if err != nil || len(got) != 3 || got[0] != 4 || got[1] != 4 || got[2] != 3 {
		t.Errorf("tasksPerNode: %v %v", got, err)
	}
	if _, err := tasksPerNode("4(x99999999999)"); err == nil {
		t.Error("huge repeat accepted")
	}
}

var osHostname = hostname

func itoa(n int) string { return strconv.Itoa(n) }
