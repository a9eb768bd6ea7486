package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"

	"github.com/rayctl/rayctl/pkg/datadir"
	"github.com/rayctl/rayctl/pkg/demo"
	"github.com/rayctl/rayctl/pkg/instance"
)

type demoOptions struct {
	file    string
	cluster *clusterFlags
	keep    bool
	start   bool
	timeout time.Duration
}

func newDemoCommand(g *globalFlags) *cobra.Command {
	o := &demoOptions{}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run a sample RayJob and show its trigger chain live, then the latency of each hop and the job's result",
		Long: `Apply a sample RayJob (configs/samples/rayjob-http.yaml, under a new name) in its own namespace,
print each hop of the trigger chain as it happens — the API server accepting writes, the kubelet
writing Pod status, each controller's informer, mapping, queue, Reconcile, status writes and
dashboard calls — and, once the RayJob is Complete or Failed, a table of the latency of every hop
on the causal line from the head Pod's Ready write to the job's submission, the job's result and
the time from apply to the end. The RayJob is deleted at the end unless --keep.

It runs against the rayctl on the data dir, or the cluster --kubeconfig, $KUBECONFIG or --context
name, as kubectl would; --start starts rayctl in the background on the data dir first (and stops it
at the end). Made for a projector: 80 columns, colour only on a terminal.`,
		Example: `  rayctl up --detach && rayctl demo
  rayctl demo --start
  rayctl demo --file my-rayjob.yaml --namespace team-a --keep`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			out := cmd.OutOrStdout()
			cfg, err := o.config(g.dataDir, isTerminal(out))
			if err != nil {
				return err
			}
			return demo.Run(ctx, out, cfg)
		},
	}
	cmd.Flags().StringVarP(&o.file, "file", "f", "", "a RayJob manifest to run instead of the sample")
	o.cluster = addClusterFlags(cmd, "demo")
	cmd.Flags().BoolVar(&o.keep, "keep", false, "keep the RayJob (and its cluster) at the end instead of deleting it")
	cmd.Flags().BoolVar(&o.start, "start", false, "start rayctl up --detach if rayctl is not running, and stop it at the end")
	cmd.Flags().DurationVar(&o.timeout, "timeout", 5*time.Minute, "how long to wait for the RayJob to finish")
	return cmd
}

// config turns the flags into the demo's Config: the cluster to connect to and, with --start when
// rayctl is not running on the data dir, how to start and stop it.
func (o *demoOptions) config(dataDir string, color bool) (demo.Config, error) {
	dir, err := datadir.Open(dataDir)
	if err != nil {
		return demo.Config{}, err
	}
	cfg := demo.Config{File: o.file, Keep: o.keep, Timeout: o.timeout, Color: color,
		Connect: func() (*rest.Config, string, error) { return o.cluster.connect(dir) }}
	if _, rerr := dir.ReadState(); rerr != nil && o.cluster.ownKubeconfig() {
		if !o.start {
			return cfg, fmt.Errorf("rayctl is not running on %s: start it with `rayctl up --detach`, or run `rayctl demo --start`", dir.Path)
		}
		cfg.Start = &demo.Starter{
			Where: dir.Path,
			Start: func(ctx context.Context) (time.Duration, error) {
				up, err := instance.StartDetached(ctx, instance.Options{DataDir: dir.Path, Args: []string{"--port", "0"}})
				if err != nil {
					return 0, err
				}
				return up.Reported, nil
			},
			Stop: func(out io.Writer) error { return down(out, dir.Path, time.Minute) },
		}
	}
	return cfg, nil
}
