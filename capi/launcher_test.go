package main

import msccl "github.com/msccl-go/msccl-go"

// The cuda device launches on the caller's stream (and so allows graph
// capture) only if msccl.RankExec has the methods capi looks for at run
// time: keep the two in step at compile time.
var _ streamLauncher = (*msccl.RankExec)(nil)
