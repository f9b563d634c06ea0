module github.com/msccl-go/msccl-go

go 1.26.8

require (
	github.com/NVIDIA/go-nvml v0.13.4-1
	github.com/alecthomas/participle/v2 v2.1.4
	golang.org/x/tools v0.52.0
	gopkg.in/yaml.v3 v3.0.1
)

require github.com/google/uuid v1.6.0 // indirect
