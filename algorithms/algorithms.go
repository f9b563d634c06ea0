package algorithms

import (
	"embed"
	"io/fs"
	"sort"
	"strings"

	"github.com/msccl-go/msccl-go/compiler"
)

//go:embed *.msccl selection.yaml
var files embed.FS

// FS is the library as a file system: NAME.msccl and selection.yaml.
func FS() fs.FS { return files }

// Selection is the path of the selection table in FS.
const Selection = "selection.yaml"

// Names lists the library's algorithms (file names without .msccl).
func Names() []string {
	ents, _ := fs.ReadDir(files, ".")
	var out []string
	for _, e := range ents {
		if n, ok := strings.CutSuffix(e.Name(), ".msccl"); ok {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// Source returns the program of algorithm name.
func Source(name string) ([]byte, error) {
	return fs.ReadFile(files, name+".msccl")
}

// Plans compiles the selection table's rows that match the world given by
// defines (compiler.PlansFS over the embedded library).
func Plans(defines map[string]int64) ([]compiler.NamedPlan, error) {
	return compiler.PlansFS(files, Selection, defines)
}
