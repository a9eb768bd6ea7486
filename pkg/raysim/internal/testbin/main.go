// Command testbin is raysim alone as a `ray` binary, for tests that need a
// real executable (the raysim OCI image test builds it with CGO_ENABLED=0).
// The shipped binary is rayctl, which dispatches to raysim.Main itself.
package main

import (
	"os"

	"github.com/rayctl/rayctl/pkg/raysim"
)

func main() {
	os.Exit(raysim.Main(os.Args[1:], os.Stdout, os.Stderr))
}
