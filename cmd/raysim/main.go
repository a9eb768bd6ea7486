// raysim is rayctl's offline stand-in for Ray on its own: the code rayctl runs when invoked as `ray`,
// without the control plane linked in. Every `ray` and `wget` a raysim pod runs (the head's and
// workers' `ray start`, the workers' wait-gcs-ready health-checks, the readiness probes' wget, the
// submitter's `ray job` commands) is a new process; this binary starts in about 10 ms, where the
// whole rayctl spends 0.1–0.2 s initialising packages raysim never uses. `make build` puts it beside
// rayctl, whose raysim image then carries it as /usr/bin/ray (see pkg/controlplane's simBinary).
package main

import (
	"os"

	"github.com/rayctl/rayctl/pkg/raysim"
)

// Version is set by the build (-ldflags -X main.Version=…) to rayctl's version: rayctl uses this
// binary for its raysim image only when the two agree.
var Version = "dev"

func main() {
	raysim.Version = Version
	os.Exit(raysim.Main(os.Args[1:], os.Stdout, os.Stderr))
}
