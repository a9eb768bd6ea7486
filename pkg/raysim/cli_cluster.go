package raysim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"github.com/rayctl/rayctl/pkg/raysim/auth"
	"github.com/rayctl/rayctl/pkg/raysim/dashboard"
	"github.com/rayctl/rayctl/pkg/raysim/gcs"
	"github.com/rayctl/rayctl/pkg/raysim/jobs"
	"github.com/rayctl/rayctl/pkg/raysim/node"
)

// localTempDir is where local commands look for a head started on this machine.
func localTempDir() string {
	if d := os.Getenv("RAY_TMPDIR"); d != "" {
		return d
	}
	return node.DefaultTempDir
}

// clientToken is the token raysim's clients send, as Ray's do: the one auth.Token finds when
// RAY_AUTH_MODE=token, else "". With token mode on and no token found it says so on stderr and ok is
// false: the command exits 1, as Ray's CLI fails then.
func clientToken(stderr io.Writer) (token string, ok bool) {
	token, err := auth.Token(os.Getenv)
	if err != nil {
		fmt.Fprintln(stderr, "raysim:", err)
		return "", false
	}
	return token, true
}

// newGCSClient is a GCS client for addr that sends token.
func newGCSClient(addr, token string) *gcs.Client {
	c := gcs.NewClient(addr)
	c.Token = token
	return c
}

// resolveGCS finds the GCS address: the flag, else $RAY_ADDRESS (when it is
// not a URL), else the head started on this machine, else 127.0.0.1:6379.
func resolveGCS(flagAddr string) (string, error) {
	addr := flagAddr
	if addr == "" {
		if env := os.Getenv("RAY_ADDRESS"); env != "" && !strings.Contains(env, "://") {
			addr = env
		}
	}
	if addr == "" || addr == "auto" {
		if info, err := node.ReadHeadInfo(localTempDir()); err == nil {
			return info.GCSAddress, nil
		}
		if addr == "auto" {
			return "", fmt.Errorf("no head is running on this machine (no %s/raysim/head.json)", localTempDir())
		}
		return fmt.Sprintf("127.0.0.1:%d", defaultGCSPort), nil
	}
	if strings.Contains(addr, "://") {
		return "", fmt.Errorf("%q is a URL; this command needs the GCS address HOST:PORT", addr)
	}
	return withDefaultPort(addr, defaultGCSPort), nil
}

func cmdHealthCheck(args []string, stdout, stderr io.Writer) int {
	f := newFlagSet("health-check", stderr).value("address", "component").boolean("skip-version-check")
	if err := f.parse(args); err != nil {
		fmt.Fprintln(stderr, "raysim:", err)
		return 2
	}
	if f.str("component") != "" {
		fmt.Fprintf(stderr, "raysim: warning: ray health-check: --component=%s is not checked separately; checking the GCS\n", f.str("component"))
	}
	token, ok := clientToken(stderr)
	if !ok {
		return 1
	}
	addr, err := resolveGCS(f.str("address"))
	if err != nil {
		fmt.Fprintln(stderr, "raysim:", err)
		return 1
	}
	if err := waitHealthy(newGCSClient(addr, token), time.Duration(envInt(healthCheckWaitEnv, 45))*time.Second); err != nil {
		fmt.Fprintf(stderr, "raysim: GCS at %s is not healthy: %v\n", addr, err)
		return 1
	}
	return 0
}

// healthCheckWaitEnv bounds, in seconds, how long `ray health-check` waits for a GCS it cannot reach.
const healthCheckWaitEnv = "RAYSIM_HEALTH_CHECK_WAIT_S"

// waitHealthy asks the GCS for its health; while nothing answers at its address (refused, unreachable,
// or its name not yet resolving) it asks again, soon at first and then once a second, for up to wait.
// Ray's own `ray health-check` does the same: its GCS client waits for the GCS to become available
// (Ray 2.60 gave up on a closed port after ~45 s, "Timed out while waiting for GCS to become
// available") rather than failing at the first refused connection. So KubeRay's wait-gcs-ready init
// container, started next to a head still coming up, sees the GCS as soon as it listens instead of
// sleeping between attempts. A GCS that answers, even unhealthy, is reported at once.
func waitHealthy(c *gcs.Client, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	backoff := 50 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := c.Health(ctx)
		cancel()
		var netErr *net.OpError
		var dnsErr *net.DNSError
		if err == nil || !(errors.As(err, &netErr) || errors.As(err, &dnsErr)) || time.Now().Add(backoff).After(deadline) {
			return err
		}
		time.Sleep(backoff)
		backoff = min(2*backoff, time.Second)
	}
}

func cmdStatus(args []string, stdout, stderr io.Writer) int {
	f := newFlagSet("status", stderr).value("address").boolean("verbose", "v")
	if err := f.parse(args); err != nil {
		fmt.Fprintln(stderr, "raysim:", err)
		return 2
	}
	token, ok := clientToken(stderr)
	if !ok {
		return 1
	}
	addr, err := resolveGCS(f.str("address"))
	if err != nil {
		fmt.Fprintln(stderr, "raysim:", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := newGCSClient(addr, token)
	if info, err := c.Info(ctx); err == nil && info.DashboardURL != "" {
		// The head's dashboard knows the pending jobs' demands too.
		dash := jobs.NewClient(info.DashboardURL)
		dash.Token = token
		if report, err := dash.StatusReport(ctx); err == nil && report != "" {
			fmt.Fprintln(stdout, report)
			return 0
		}
	}
	nodes, err := c.Nodes(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "raysim: cannot reach the GCS at %s: %v\n", addr, err)
		return 1
	}
	fmt.Fprint(stdout, dashboard.FormatStatus(nodes, nil, nil, time.Now()))
	return 0
}
