package bootstrap

import (
	"crypto/rand"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/msccl-go/msccl-go/internal/hostid"
)

// DefaultTimeout bounds every blocking step unless Config.Timeout or
// MSCCL_BOOTSTRAP_TIMEOUT says otherwise.
const DefaultTimeout = 30 * time.Second

// Config says who this rank is and where the rendezvous is.
type Config struct {
	Rank, World           int
	LocalRank, LocalWorld int    // ranks on this host; -1 when unknown
	Node                  string // host identity used for "same node" decisions; MSCCL_NODE overrides
	ID                    UniqueID
	Timeout               time.Duration // every blocking step; default 30 s, MSCCL_BOOTSTRAP_TIMEOUT overrides

	// IDFile, when set, is where the unique id lives (MSCCL_UNIQUE_ID_FILE):
	// rank 0 creates a fresh id and writes it there; the other ranks wait
	// for it (and re-read it if the root they reach refuses them). ID is
	// then ignored.
	IDFile string
	// ListenAddr is what rank 0 listens on; "" means ID.Addr, exactly
	// (loopback stays loopback). MSCCL_BOOTSTRAP_LISTEN sets it, for a
	// host whose name resolves on itself to an address the other hosts
	// cannot reach (":PORT" listens on every interface).
	ListenAddr string
	// ListenFD, when > 0, is an inherited listening socket rank 0 serves
	// on instead of binding (MSCCL_BOOTSTRAP_LISTEN_FD; Spawn passes one so
	// no other program can take the port in between).
	ListenFD int
	// Source says where the configuration came from ("torchrun",
	// "openmpi", "slurm", "msccl", "single process"), and where the secret
	// came from; errors quote it.
	Source string
}

// hostname is this machine's node identity when nothing names one: the
// hostname and boot id (internal/hostid, which runtime/topo reports too,
// so the two agree). A variable so tests can pin it.
var hostname = func() (string, error) {
	id := hostid.Local()
	if id.Node == "" {
		return "", errors.New("no host name")
	}
	return id.Node, nil
}

// FromEnv reads the MSCCL_* variables over those of torchrun, Open MPI and
// Slurm (docs/architecture.md lists them). Without any, it configures a
// single-process job (rank 0 of 1).
func FromEnv() (Config, error) { return fromEnv(os.Getenv) }

// launcher is what one launcher's variables say.
type launcher struct {
	name                  string
	rank, world           int
	localRank, localWorld int
	node                  string
	rootHost              string // where rank 0 runs; "" = unknown
	port                  int    // root port; 0 = unknown
	// secret is a random per-job value the launcher itself hands every
	// rank through the environment (nil when it gives none).
	secret []string
	// noSecret says, when secret is nil, how to give this launcher's
	// job one.
	noSecret string
	err      error
}

func fromEnv(get func(string) string) (Config, error) {
	cfg := Config{LocalRank: -1, LocalWorld: -1, Timeout: DefaultTimeout}
	var l *launcher
	for _, detect := range []func(func(string) string) *launcher{torchrun, openMPI, slurm} {
		if l = detect(get); l != nil {
			break
		}
	}
	if l != nil && l.err != nil {
		return cfg, l.err
	}
	if l == nil {
		l = &launcher{name: "msccl", localRank: -1, localWorld: -1}
		if get("MSCCL_RANK") == "" && get("MSCCL_WORLD_SIZE") == "" {
			l.name, l.world, l.localRank, l.localWorld, l.rootHost = "single process", 1, 0, 1, "127.0.0.1"
		}
	}
	cfg.Source = l.name
	cfg.Rank, cfg.World, cfg.LocalRank, cfg.LocalWorld = l.rank, l.world, l.localRank, l.localWorld
	ints := []struct {
		name string
		dst  *int
	}{{"MSCCL_RANK", &cfg.Rank}, {"MSCCL_WORLD_SIZE", &cfg.World}, {"MSCCL_LOCAL_RANK", &cfg.LocalRank},
		{"MSCCL_LOCAL_WORLD_SIZE", &cfg.LocalWorld}, {"MSCCL_BOOTSTRAP_LISTEN_FD", &cfg.ListenFD}}
	for _, v := range ints {
		if s := get(v.name); s != "" {
			n, err := envInt(v.name, s)
			if err != nil {
				return cfg, err
			}
			*v.dst = n
		}
	}
	if l.name == "msccl" && (get("MSCCL_RANK") == "" || get("MSCCL_WORLD_SIZE") == "") {
		return cfg, fmt.Errorf("bootstrap: MSCCL_RANK and MSCCL_WORLD_SIZE must be set together (no torchrun, Open MPI or Slurm variables found)")
	}
	if cfg.World < 1 || cfg.Rank < 0 || cfg.Rank >= cfg.World {
		return cfg, fmt.Errorf("bootstrap: rank %d of world size %d (from %s): want 0 <= rank < world", cfg.Rank, cfg.World, cfg.Source)
	}
	if cfg.LocalRank >= 0 && cfg.LocalWorld >= 0 && cfg.LocalRank >= cfg.LocalWorld {
		return cfg, fmt.Errorf("bootstrap: local rank %d of local world size %d (from %s): want local rank < local world", cfg.LocalRank, cfg.LocalWorld, cfg.Source)
	}
	if s := get("MSCCL_BOOTSTRAP_TIMEOUT"); s != "" {
		d, err := envDuration("MSCCL_BOOTSTRAP_TIMEOUT", s)
		if err != nil {
			return cfg, err
		}
		cfg.Timeout = d
	}
	cfg.Node = get("MSCCL_NODE")
	if cfg.Node == "" {
		cfg.Node = l.node
	}
	if cfg.Node == "" {
		h, err := hostname()
		if err != nil {
			return cfg, fmt.Errorf("bootstrap: host name for the node identity: %w (set MSCCL_NODE)", err)
		}
		cfg.Node = h
	}
	return cfg, rendezvous(&cfg, l, get)
}

// rendezvous fills the root address and the secret, in this order of
// preference: MSCCL_UNIQUE_ID, MSCCL_UNIQUE_ID_FILE, then an address from
// MSCCL_BOOTSTRAP_ADDR / MSCCL_BOOTSTRAP_PORT / the launcher with a
// secret from MSCCL_SECRET or a random per-job key the launcher put in
// the environment. Nothing is derived from guessable job variables (run
// id, job id, addresses): without a secret the job is refused, saying how
// to give it one (docs/rationale.md).
func rendezvous(cfg *Config, l *launcher, get func(string) string) error {
	if s := get("MSCCL_UNIQUE_ID"); s != "" {
		id, err := ParseUniqueID(s)
		if err != nil {
			return fmt.Errorf("MSCCL_UNIQUE_ID: %w", err)
		}
		cfg.ID, cfg.Source = id, cfg.Source+", MSCCL_UNIQUE_ID"
		return nil
	}
	if s := get("MSCCL_UNIQUE_ID_FILE"); s != "" {
		cfg.IDFile, cfg.Source = s, cfg.Source+", MSCCL_UNIQUE_ID_FILE"
		return nil
	}
	if cfg.World == 1 && get("MSCCL_BOOTSTRAP_ADDR") == "" {
		// One rank needs no meeting point: a loopback port of its own
		// cannot collide with another job's.
		if _, err := rand.Read(cfg.ID.Secret[:]); err != nil {
			return fmt.Errorf("bootstrap: random secret: %w", err)
		}
		cfg.ID.Addr, cfg.ListenAddr = "127.0.0.1:0", "127.0.0.1:0"
		return nil
	}
	host, port := l.rootHost, l.port
	if s := get("MSCCL_BOOTSTRAP_PORT"); s != "" {
		p, err := envInt("MSCCL_BOOTSTRAP_PORT", s)
		if err != nil || p < 1 || p > 65535 {
			return fmt.Errorf("bootstrap: MSCCL_BOOTSTRAP_PORT=%q: want a port in 1..65535", s)
		}
		port = p
	}
	if s := get("MSCCL_BOOTSTRAP_ADDR"); s != "" {
		h, p, err := splitPort(s)
		if err != nil {
			return fmt.Errorf("bootstrap: MSCCL_BOOTSTRAP_ADDR: %w", err)
		}
		host, port = h, p
	}
	if host == "" || port == 0 {
		return fmt.Errorf("bootstrap: %s does not say where rank 0 runs; set MSCCL_UNIQUE_ID, MSCCL_UNIQUE_ID_FILE or MSCCL_BOOTSTRAP_ADDR=HOST:PORT", l.name)
	}
	cfg.ID.Addr = net.JoinHostPort(host, strconv.Itoa(port))
	if s := get("MSCCL_BOOTSTRAP_LISTEN"); s != "" {
		if _, _, err := net.SplitHostPort(s); err != nil {
			return fmt.Errorf("bootstrap: MSCCL_BOOTSTRAP_LISTEN=%q: want HOST:PORT or :PORT", clip(s))
		}
		cfg.ListenAddr = s
	}
	if s := get("MSCCL_SECRET"); s != "" {
		cfg.ID.Secret = secretFrom("msccl-secret-v1", s)
		cfg.Source += ", MSCCL_SECRET"
		return nil
	}
	if len(l.secret) == 0 {
		how := l.noSecret
		if how == "" {
			how = "set MSCCL_SECRET to the same random value on every rank, or MSCCL_UNIQUE_ID"
		}
		return fmt.Errorf("bootstrap: %s hands its ranks no secret, and none is derived from guessable job variables: %s", l.name, how)
	}
	cfg.ID.Secret = secretFrom("msccl-launcher-secret-v1", append([]string{l.name}, l.secret...)...)
	cfg.Source += ", the launcher's per-job key"
	return nil
}

// setSecretHow is what FromEnv tells a user whose launcher hands out no
// secret.
const setSecretHow = "set MSCCL_SECRET to the same fresh random value in every rank's environment " +
	"(e.g. export MSCCL_SECRET=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \\n') before launching), " +
	"or MSCCL_UNIQUE_ID_FILE to a path on storage every rank reads (rank 0 writes a fresh id there, readable only by you)"

// torchrun (and torch.distributed.launch, and most tools that mimic them)
// set RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and
// MASTER_PORT. The TCPStore owns MASTER_PORT, so the root takes the next.
func torchrun(get func(string) string) *launcher {
	if get("RANK") == "" || get("WORLD_SIZE") == "" {
		return nil
	}
	l := &launcher{name: "torchrun", localRank: -1, localWorld: -1}
	l.rank, l.err = envInt("RANK", get("RANK"))
	l.intVar(&l.world, "WORLD_SIZE", get)
	l.intVar(&l.localRank, "LOCAL_RANK", get)
	l.intVar(&l.localWorld, "LOCAL_WORLD_SIZE", get)
	l.rootHost = get("MASTER_ADDR")
	if s := get("MASTER_PORT"); s != "" {
		l.intVar(&l.port, "MASTER_PORT", get)
		l.port++
	}
	// torchrun hands out no secret in the environment (the run id is the
	// --rdzv-id the user chose unless --standalone, and nothing tells
	// which); its store would carry one, which is what Python's
	// Communicator.from_torch uses.
	l.noSecret = setSecretHow + "; from Python, Communicator.from_torch hands a fresh id through torch's own store"
	return l
}

// openMPI: mpirun sets OMPI_COMM_WORLD_{RANK,SIZE,LOCAL_RANK,LOCAL_SIZE}
// but not where rank 0 runs; a job on one host uses loopback, otherwise
// MASTER_ADDR or MSCCL_BOOTSTRAP_ADDR must say.
func openMPI(get func(string) string) *launcher {
	if get("OMPI_COMM_WORLD_RANK") == "" || get("OMPI_COMM_WORLD_SIZE") == "" {
		return nil
	}
	l := &launcher{name: "openmpi", localRank: -1, localWorld: -1}
	l.intVar(&l.rank, "OMPI_COMM_WORLD_RANK", get)
	l.intVar(&l.world, "OMPI_COMM_WORLD_SIZE", get)
	l.intVar(&l.localRank, "OMPI_COMM_WORLD_LOCAL_RANK", get)
	l.intVar(&l.localWorld, "OMPI_COMM_WORLD_LOCAL_SIZE", get)
	job := firstOf(get, "PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", "OMPI_MCA_orte_ess_jobid")
	switch {
	case get("MASTER_ADDR") != "":
		l.rootHost = get("MASTER_ADDR")
	case l.localWorld == l.world:
		l.rootHost = "127.0.0.1"
	}
	if s := get("MASTER_PORT"); s != "" {
		l.intVar(&l.port, "MASTER_PORT", get)
		l.port++
	} else if job != "" {
		l.port = derivedPort(job)
	}
	// mpirun puts a random per-job key in every rank's environment for
	// its PSM transports: a secret the launcher itself handed out.
	if key := firstOf(get, "OMPI_MCA_orte_precondition_transports", "OMPI_MCA_opal_precondition_transports"); key != "" {
		l.secret = []string{job, key}
	}
	l.noSecret = setSecretHow + " (mpirun -x MSCCL_SECRET passes it on)"
	return l
}

// slurm: srun sets SLURM_PROCID, SLURM_NTASKS (SLURM_STEP_NUM_TASKS in a
// step), SLURM_LOCALID, SLURM_NODEID and the node list; rank 0 runs on the
// step's first node (block and cyclic distributions both start there).
func slurm(get func(string) string) *launcher {
	ntasks := firstOf(get, "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_NPROCS")
	if get("SLURM_PROCID") == "" || ntasks == "" {
		return nil
	}
	l := &launcher{name: "slurm", localRank: -1, localWorld: -1, node: get("SLURMD_NODENAME")}
	l.intVar(&l.rank, "SLURM_PROCID", get)
	if n, err := envInt("SLURM_NTASKS", ntasks); err != nil {
		l.setErr(err)
	} else {
		l.world = n
	}
	l.intVar(&l.localRank, "SLURM_LOCALID", get)
	if per := firstOf(get, "SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"); per != "" && get("SLURM_NODEID") != "" {
		counts, err := tasksPerNode(per)
		var node int
		l.intVar(&node, "SLURM_NODEID", get)
		if err == nil && node < len(counts) {
			l.localWorld = counts[node]
		}
	}
	l.rootHost = firstHost(firstOf(get, "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"))
	if a := get("MASTER_ADDR"); a != "" {
		l.rootHost = a
	}
	job := get("SLURM_JOB_ID") + "." + get("SLURM_STEP_ID")
	if s := get("MASTER_PORT"); s != "" {
		l.intVar(&l.port, "MASTER_PORT", get)
		l.port++
	} else if get("SLURM_JOB_ID") != "" {
		l.port = derivedPort(job)
	}
	// Slurm hands out no per-job secret (job ids and node lists are
	// public through squeue).
	l.noSecret = setSecretHow + " (srun passes the environment on)"
	return l
}

func (l *launcher) intVar(dst *int, name string, get func(string) string) {
	s := get(name)
	if s == "" {
		return
	}
	n, err := envInt(name, s)
	if err != nil {
		l.setErr(err)
		return
	}
	*dst = n
}

func (l *launcher) setErr(err error) {
	if l.err == nil {
		l.err = err
	}
}

func firstOf(get func(string) string, names ...string) string {
	for _, n := range names {
		if s := get(n); s != "" {
			return s
		}
	}
	return ""
}

func envInt(name, s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 0 {
		return 0, fmt.Errorf("bootstrap: %s=%q: want a non-negative integer", name, clip(s))
	}
	return n, nil
}

// envDuration accepts a Go duration ("90s", "2m") or a number of seconds.
func envDuration(name, s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if f, err := strconv.ParseFloat(s, 64); err == nil && f > 0 && f < 1e9 {
		return time.Duration(f * float64(time.Second)), nil
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return d, nil
	}
	return 0, fmt.Errorf("bootstrap: %s=%q: want a positive duration (\"90s\") or a number of seconds", name, clip(s))
}

// derivedPort maps a job identity into [20000, 30000), below Linux's
// ephemeral range (32768 and up) so outgoing connections never hold it.
func derivedPort(job string) int {
	h := fnv.New32a()
	h.Write([]byte(job))
	return 20000 + int(h.Sum32()%10000)
}

// tasksPerNode expands Slurm's "4(x2),3" into [4 4 3].
func tasksPerNode(s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		n, rep := part, "1"
		if i := strings.Index(part, "(x"); i >= 0 && strings.HasSuffix(part, ")") {
			n, rep = part[:i], part[i+2:len(part)-1]
		}
		c, err1 := strconv.Atoi(n)
		r, err2 := strconv.Atoi(rep)
		if err1 != nil || err2 != nil || r < 1 || r > maxWorld || len(out)+r > maxWorld {
			return nil, fmt.Errorf("bootstrap: tasks per node %q: cannot parse %q", clip(s), part)
		}
		for i := 0; i < r; i++ {
			out = append(out, c)
		}
	}
	return out, nil
}

// firstHost returns the first host of a Slurm host list:
// "gpu[03-05,9],cpu1" → "gpu03".
func firstHost(list string) string {
	depth, end := 0, len(list)
	for i, c := range list {
		if c == '[' {
			depth++
		} else if c == ']' {
			depth--
		} else if c == ',' && depth == 0 {
			end = i
			break
		}
	}
	h := list[:end]
	i := strings.IndexByte(h, '[')
	j := strings.IndexByte(h, ']')
	if i < 0 || j < i {
		return h
	}
	first := h[i+1 : j]
	if k := strings.IndexAny(first, ",-"); k >= 0 {
		first = first[:k]
	}
	return h[:i] + first + h[j+1:]
}
