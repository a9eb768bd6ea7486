package raysim

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/rayctl/rayctl/pkg/raysim/autoscaler"
)

// cmdKubeRayAutoscaler is `ray kuberay-autoscaler --cluster-name N --cluster-namespace NS`, the
// sidecar KubeRay runs in an autoscaling head Pod. It reaches the API server with the Pod's in-cluster
// credentials (outside a Pod, $KUBECONFIG's), and its head's GCS at $RAY_ADDRESS, else the head started
// in this Pod (the shared /tmp/ray), else 127.0.0.1:6379. AUTOSCALER_UPDATE_INTERVAL_S sets the period.
func cmdKubeRayAutoscaler(args []string, stdout, stderr io.Writer) int {
	f := newFlagSet("kuberay-autoscaler", stderr).value("cluster-name", "cluster-namespace", "logging-level",
		"logging-format", "logging-filename", "logging-rotate-bytes", "logging-rotate-backup-count")
	if err := f.parse(args); err != nil {
		fmt.Fprintln(stderr, "raysim:", err)
		return 2
	}
	name, ns := f.str("cluster-name"), f.str("cluster-namespace")
	if name == "" || ns == "" {
		fmt.Fprintln(stderr, "raysim: ray kuberay-autoscaler needs --cluster-name and --cluster-namespace")
		return 2
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		kc := os.Getenv("KUBECONFIG")
		if kc == "" {
			fmt.Fprintf(stderr, "raysim: no in-cluster credentials (%v) and no $KUBECONFIG\n", err)
			return 1
		}
		if cfg, err = clientcmd.BuildConfigFromFlags("", kc); err != nil {
			fmt.Fprintf(stderr, "raysim: %s: %v\n", kc, err)
			return 1
		}
	}
	cfg.UserAgent = "ray-kuberay-autoscaler (raysim " + Version + ")"
	addr, err := resolveGCS("")
	if err != nil {
		fmt.Fprintln(stderr, "raysim:", err)
		return 1
	}
	token, ok := clientToken(stderr)
	if !ok {
		return 1
	}
	period := autoscaler.DefaultPeriod
	if v := os.Getenv("AUTOSCALER_UPDATE_INTERVAL_S"); v != "" {
		s, err := strconv.ParseFloat(v, 64)
		if err != nil || s <= 0 {
			fmt.Fprintf(stderr, "raysim: AUTOSCALER_UPDATE_INTERVAL_S=%q is not a positive number of seconds\n", v)
			return 2
		}
		period = time.Duration(s * float64(time.Second))
	}
	a, err := autoscaler.New(autoscaler.Config{
		Cluster: name, Namespace: ns, REST: cfg, GCS: newGCSClient(addr, token), Period: period,
		Logf: func(format string, args ...any) {
			fmt.Fprintf(stdout, "%s INFO autoscaler -- %s\n", time.Now().Format("2006-01-02 15:04:05,000"), fmt.Sprintf(format, args...))
		},
	})
	if err != nil {
		fmt.Fprintln(stderr, "raysim:", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	a.Run(ctx)
	return 0
}
