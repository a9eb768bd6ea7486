package main

import (
	"fmt"
	"os"
)

// runRay runs raysim, the offline stand-in for Ray's processes.
func runRay(args []string) int {
	fmt.Fprintln(os.Stderr, "raysim is not wired yet")
	return 1
}
