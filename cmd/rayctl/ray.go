package main

import (
	"os"

	"github.com/rayctl/rayctl/pkg/raysim"
)

// runRay runs raysim, the offline stand-in for Ray's processes.
func runRay(args []string) int {
	raysim.Version = Version
	return raysim.Main(args, os.Stdout, os.Stderr)
}
