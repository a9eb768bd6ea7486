package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/rayctl/rayctl/pkg/chain"
	"github.com/rayctl/rayctl/pkg/controlplane"
	"github.com/rayctl/rayctl/pkg/instance"
	"github.com/rayctl/rayctl/pkg/runtime/network/egress"
	"github.com/rayctl/rayctl/pkg/runtime/selector"
	"github.com/rayctl/rayctl/pkg/userns"
)

func newUpCommand(g *globalFlags) *cobra.Command {
	var c controlplane.Config
	var detach bool
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Start the control plane in the foreground (Ctrl-C stops it), or in the background with --detach",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c.DataDir, c.Version, c.Out, c.Err = g.dataDir, Version, cmd.OutOrStdout(), os.Stderr
			// Refused before anything starts, --detach or not.
			cp, err := controlplane.New(c)
			if err != nil {
				return err
			}
			if detach {
				return upDetached(cmd.OutOrStdout(), g.dataDir)
			}
			sb, err := controlplane.DecideSandbox(c.PodNetwork)
			if err != nil {
				return err
			}
			if sb.Reexec {
				// Not root: the same command again, inside a user namespace of rayctl's own. What an earlier one
				// left running (killed with its launcher) ends first, and what this one leaves after it, however
				// it ended: no later rayctl could enter their namespaces.
				controlplane.EndRootless(g.dataDir)
				code, err := userns.Reexec(os.Args[1:], nil)
				controlplane.EndRootless(g.dataDir)
				if err != nil {
					return err
				}
				os.Exit(code)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return cp.Run(ctx)
		},
	}
	f := cmd.Flags()
	f.IntVar(&c.Port, "port", 6443, "API server port on 127.0.0.1 (0 picks a free one and writes it into the kubeconfig)")
	f.BoolVar(&detach, "detach", false, "start in the background and return once ready; rayctl down stops it")
	f.StringVar(&c.Runtime, "runtime", "auto", "container runtime: auto (process when the host's Ray runs Ray's images, else containerd if present, else process), containerd, process, or fake (benchmarks only)")
	f.StringVar(&c.Ray, "ray", selector.RayAuto, "what runs Ray's images (rayproject/ray…): auto (the host's Ray when found, else the images on containerd, else raysim), host (the host's Ray, on the process runtime, or fail), image (containerd pulls and runs them), or sim (raysim, on the process runtime)")
	f.StringVar(&c.RayPath, "ray-path", "", "the host's ray executable (default: the venv that make ray makes beside rayctl, then ray on PATH)")
	f.StringVar(&c.PodCIDR, "pod-cidr", "10.244.0.0/16", "the range pod IPs come from")
	f.StringVar(&c.Bridge, "bridge", "rayctl0", "the Linux bridge pods attach to (in rayctl's node network namespace)")
	f.StringVar(&c.PodNetwork, "pod-network", controlplane.PodNetworkAuto, "how pods are networked: auto (a network namespace each, in rayctl's node namespace, which nothing on the host reaches; as an ordinary user inside a user namespace of rayctl's own; the host's network where none can be made), sandbox (the same, or refuse to start), or host (pods share the host's network)")
	f.StringVar(&c.PodEgress, "pod-egress", egress.Auto, "whether pods reach beyond the node: auto (on where the host has a route out and slirp4netns runs, else off), on (or refuse to start), or off (a connection out is refused at once and names outside the cluster do not resolve: for offline workshops)")
	f.StringVar(&c.NodeName, "node-name", controlplane.DefaultNodeName(), "the name of this machine's Node")
	f.StringToStringVar(&c.NodeCapacity, "node-capacity", nil, "what the Node advertises instead of the host's measure, e.g. cpu=8,memory=16Gi (more than the host has lets samples sized for a bigger machine schedule, and overcommits it)")
	f.StringArrayVar(&c.Nodes, "node", nil, "another Node on this machine, NAME or NAME:RESOURCES, e.g. --node gpu1:cpu=4,memory=16Gi,nvidia.com/gpu=1 (repeatable; its pods run here as the first node's do; without resources it advertises the host's measure)")
	f.StringArrayVar(&c.NodeLabels, "node-labels", nil, "labels of a node, NAME:key=value,key2=value2, e.g. --node-labels gpu1:accelerator=nvidia-a100 (repeatable; any node, the first included)")
	f.StringArrayVar(&c.NodeTaints, "node-taints", nil, "taints of a node as kubectl taint spells them, NAME:key=value:Effect,key2:Effect, e.g. --node-taints gpu1:nvidia.com/gpu=present:NoSchedule (repeatable)")
	f.StringVar(&c.SimulatedNodes, "simulated-nodes", "", "add COUNT simulated nodes, sim-001…, COUNT or COUNT:RESOURCES, e.g. 100:cpu=32,memory=128Gi: pods bound to them go Running and Ready without a process (as kwok's do), for trying scheduling and controllers at scale")
	f.BoolVar(&c.Kubelet, "kubelet", true, "run this machine's kubelet and the binder that schedules pods onto it")
	f.BoolVar(&c.GatewayAPI, "gateway-api", false, "also serve the Gateway API (gateway.networking.k8s.io: GatewayClass, Gateway, HTTPRoute, GRPCRoute, ReferenceGrant) as CRDs, and run rayctl's own Gateway controller for GatewayClasses whose controllerName is rayctl.dev/gateway-controller (RayService incremental upgrades use it); off by default, as on kind, since the CRDs cost every start CPU and memory (once installed they stay: deleting a CRD deletes its objects)")
	f.Int64Var(&c.EtcdQuota, "etcd-quota-bytes", 0, "etcd's database quota in bytes (0: etcd's default, 2 GiB); over it, writes fail with an out-of-space error until objects are deleted")
	ctrl := &c.Controllers
	f.StringSliceVar(&ctrl.Ray, "controllers", []string{"all"}, "Ray controllers to run: all, none (leave ray.io to an external operator such as KubeRay), or names ("+strings.Join(controlplane.RayControllers(), ", ")+"; -name leaves one out)")
	f.StringSliceVar(&ctrl.Kube, "kube-controllers", []string{"all"}, "kube-controller-manager controllers to run: all, none, or names ("+strings.Join(controlplane.KubeControllers(), ", ")+"; -name leaves one out)")
	f.StringSliceVar(&ctrl.WatchNamespaces, "watch-namespace", nil, "namespaces the Ray controllers watch (default: all)")
	f.IntVar(&ctrl.ReconcileConcurrency, "reconcile-concurrency", 4, "concurrent reconciles per Ray controller (never two of one object at once; KubeRay's operator defaults to 1, which serializes many RayClusters created at once behind one worker)")
	f.StringVar(&ctrl.MetricsAddr, "metrics-bind-address", "0", "where the Ray controllers serve Prometheus metrics, e.g. 127.0.0.1:8085 (0 = off; :8080 is Ray's metrics port)")
	f.StringVar(&ctrl.HealthAddr, "health-probe-bind-address", "0", "where the Ray controllers serve /healthz and /readyz, e.g. 127.0.0.1:8086 (0 = off)")
	f.IntVar(&c.ChainBuffer, "chain-buffer", chain.DefaultSize, "trigger-chain events kept for rayctl trace and rayctl diagnose (0 turns the recorder off)")
	f.BoolVar(&ctrl.LeaderElect, "leader-elect", true, "hold a Lease before running controllers, so two rayctl instances on one API server never both act")
	f.StringVar(&c.StartupCPUProfile, "startup-cpuprofile", "", "write a CPU profile of the start-up (until ready) to this file, for go tool pprof")
	_ = f.MarkHidden("startup-cpuprofile") // a developer's tool (make bench BENCH_ARGS=-startup-cpuprofile=DIR)
	return cmd
}

// upDetached starts `rayctl up` again as a background process (this command's arguments without
// --detach) and waits until it is ready.
func upDetached(out io.Writer, dataDir string) error {
	p, err := instance.StartDetached(context.Background(), instance.Options{DataDir: dataDir, Args: detachedArgs(os.Args)})
	if err != nil {
		return err
	}
	out.Write([]byte(p.Text()))
	fmt.Fprintf(out, "running in the background (pid %d); `rayctl down` stops it\n", p.Pid())
	return nil
}

// detachedArgs are the arguments of this `rayctl up --detach` without --detach, for the background child.
func detachedArgs(args []string) []string {
	var out []string
	seenUp := false
	for _, a := range args[1:] {
		if !seenUp && a == "up" {
			seenUp = true
			continue
		}
		if a == "--detach" || a == "--detach=true" {
			continue
		}
		out = append(out, a)
	}
	return out
}
