package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/rayctl/rayctl/pkg/raysubmitter"
)

// runSubmitter runs the RayJob light-weight submitter (KubeRay's quay.io/kuberay/submitter image's
// /submitter), which the process runtime runs for that image.
func runSubmitter(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return raysubmitter.Main(ctx, args, os.Getenv, os.Stdout, os.Stderr)
}
