package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/rayctl/rayctl/pkg/ui"
)

func newUICommand(g *globalFlags) *cobra.Command {
	var port int
	var cluster *clusterFlags
	cmd := &cobra.Command{
		Use:   "ui",
		Short: "Serve a page on 127.0.0.1 that draws the trigger chain of RayJobs and RayClusters live, with latencies and the diagnosis",
		Long: `Serve a page on 127.0.0.1 (never beyond loopback) that lists the RayJobs and RayClusters as they
change and, for the one selected, draws its trigger chain as a sequence diagram — a lane per
component (kubelet, API server, each controller, Ray dashboard), an arrow per hop, live as hops
happen — with the hop latencies ` + "`rayctl demo`" + ` prints and ` + "`rayctl diagnose`" + `'s checklist and verdict.
Workshop mode (?workshop=1) uses large type, replays a finished RayJob's chain slowly, and has a
button that applies the demo RayJob (in -n, default demo).

The page reaches the API server and the chain recorder only through this server, which uses the
same credentials as rayctl trace and diagnose. Open the URL it prints: its one-time token is
exchanged for a session cookie; any other request gets 401.`,
		Example: `  rayctl ui
  rayctl ui --port 8080 -n team-a`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, ns, err := connectCluster(g.dataDir, cluster)
			if err != nil {
				return err
			}
			srv, err := ui.New(ui.Options{Config: cfg, DemoNamespace: ns, Port: port})
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			fmt.Fprintf(cmd.OutOrStdout(), "rayctl ui: open %s\n(Ctrl-C stops it)\n", srv.URL())
			return srv.Serve(ctx)
		},
	}
	cluster = addClusterFlags(cmd, "demo")
	cmd.Flags().IntVar(&port, "port", 0, "the port on 127.0.0.1 to listen on (default a free one)")
	return cmd
}
