// Package raysim is an offline stand-in for Ray's processes, run as `ray`
// inside pods when no Ray image can be pulled (workshops, CI without a
// registry). It speaks the surfaces a Kubernetes control plane uses — `ray
// start --head|--address`, `ray health-check`, `ray status`, `ray stop`,
// `ray job …`, the GCS port, the dashboard with the Ray Jobs REST API and
// health endpoints, the agent's health endpoints and /metrics — and runs job
// entrypoints as real shell commands on the head; `ray kuberay-autoscaler`
// scales a KubeRay RayCluster for the jobs waiting for resources. It has no
// tasks, actors or object store. With a real Ray image the same manifests run
// real Ray. See docs/raysim.md.
package raysim

import (
	"fmt"
	"io"
	"strings"
)

// Version is raysim's version; the build may set it with -ldflags -X.
var Version = "0.1.0"

// DaemonEnv is set in the environment of the background process that
// `ray start` without --block re-executes (os.Executable() with argv[0]
// "ray" and the arguments after the `ray` word).
const DaemonEnv = "RAYSIM_DAEMON"

// Main runs raysim's CLI. args are the arguments after the `ray` word, e.g.
// []string{"start", "--head", "--block"}. It returns the process exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stdout)
		return 0
	}
	switch args[0] {
	case "-h", "--help", "help":
		usage(stdout)
		return 0
	case "--version", "version":
		fmt.Fprintf(stdout, "ray, version %s+raysim (raysim, an offline stand-in for Ray)\n", Version)
		return 0
	case "start":
		return cmdStart(args[1:], stdout, stderr)
	case "stop":
		return cmdStop(args[1:], stdout, stderr)
	case "status":
		return cmdStatus(args[1:], stdout, stderr)
	case "health-check":
		return cmdHealthCheck(args[1:], stdout, stderr)
	case "job":
		return cmdJob(args[1:], stdout, stderr)
	case "kuberay-autoscaler":
		return cmdKubeRayAutoscaler(args[1:], stdout, stderr)
	case WgetCommand:
		return cmdWget(args[1:], stdout, stderr)
	case PythonCommand:
		return cmdPython(args[1:], stdout, stderr)
	default:
		fmt.Fprintf(stderr, "raysim: `ray %s` is not supported: raysim only stands in for ray start, stop, status, health-check, job and kuberay-autoscaler (see docs/raysim.md)\n", args[0])
		return 2
	}
}

func usage(w io.Writer) {
	fmt.Fprint(w, strings.TrimLeft(`
Usage: ray COMMAND [ARGS]...

raysim `+Version+`: an offline stand-in for Ray's processes. It serves Ray's
cluster surfaces (GCS port, dashboard with the Jobs API, agent health, metrics)
and runs job entrypoints as shell commands; it has no tasks, actors or object
store.

Commands:
  start         start a head (--head) or a worker (--address=HOST:PORT) node
  stop          stop the raysim processes started on this machine
  status        show the cluster's nodes and resources
  health-check  exit 0 when the GCS at --address answers
  job           submit, status, logs, stop, list, delete jobs
  kuberay-autoscaler  scale a KubeRay RayCluster for pending jobs (the head Pod's sidecar)
  version       print the version
`, "\n"))
}
