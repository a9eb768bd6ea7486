package raysubmitter_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rayctl/rayctl/pkg/raysim/jobs"
	"github.com/rayctl/rayctl/pkg/raysim/node"
	"github.com/rayctl/rayctl/pkg/raysim/resource"
	"github.com/rayctl/rayctl/pkg/raysubmitter"
)

// dashboard runs raysim's head and returns its dashboard's URL: it serves the Jobs API and the logs'
// WebSocket as Ray's does, and runs an entrypoint that asks for half a CPU.
func dashboard(t *testing.T) string {
	t.Helper()
	cfg := node.HeadConfig{BindHost: "127.0.0.1", NodeIP: "127.0.0.1", TempDir: t.TempDir(), Resources: resource.Set{"CPU": 1}}
	h, err := node.StartHead(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h.DashboardURL()
}

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func submit(t *testing.T, vars map[string]string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	code := raysubmitter.Main(ctx, args, env(vars), &out, &errOut)
	return code, out.String(), errOut.String()
}

// The submitter submits under the id it is given, with the runtime env and entrypoint of its
// arguments, follows the logs to the job's end and exits 0; run again (a retried submitter Pod), it
// does not submit a second time but follows the same job's logs.
func TestSubmitsOnceAndFollowsTheLogs(t *testing.T) {
	url := dashboard(t)
	vars := map[string]string{raysubmitter.EnvDashboardAddress: strings.TrimPrefix(url, "http://"), raysubmitter.EnvSubmissionID: "rayjob-abc"}
	args := []string{"--runtime-env-json", `{"env_vars":{"GREETING":"hello from the runtime env"}}`, "--metadata-json", `{"owner":"bench"}`,
		"--entrypoint-num-cpus", "0.5", "--", "echo", "greeting:", "$GREETING"}
	code, out, errOut := submit(t, vars, args...)
	if code != 0 {
		t.Fatalf("exit %d; stdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if !strings.Contains(out, "greeting: hello from the runtime env") {
		t.Errorf("the job's logs are not in the output:\n%s", out)
	}
	c := jobs.NewClient(url)
	d, err := c.Get(context.Background(), "rayjob-abc")
	if err != nil {
		t.Fatal(err)
	}
	if d.Status != jobs.StatusSucceeded || d.Entrypoint != "echo greeting: $GREETING" || d.Metadata["owner"] != "bench" {
		t.Errorf("job = status %s, entrypoint %q, metadata %v; want SUCCEEDED, the arguments joined, owner=bench", d.Status, d.Entrypoint, d.Metadata)
	}

	code, out, errOut = submit(t, vars, args...)
	if code != 0 || !strings.Contains(out, "submitted before") || !strings.Contains(out, "greeting: hello from the runtime env") {
		t.Fatalf("second run: exit %d; stdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	list, err := c.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 {
		t.Errorf("%d jobs on the dashboard after two runs; want 1", len(list))
	}
}

// Without the environment the RayJob controller gives it, or with a flag that is not JSON, it says
// what is wrong and exits 1 without submitting.
func TestRefusesWhatItCannotSubmit(t *testing.T) {
	addr := dashboard(t)
	for _, tc := range []struct {
		name string
		vars map[string]string
		args []string
		want string
	}{
		{"no address", map[string]string{raysubmitter.EnvSubmissionID: "x"}, []string{"--", "true"}, raysubmitter.EnvDashboardAddress},
		{"no id", map[string]string{raysubmitter.EnvDashboardAddress: addr}, []string{"--", "true"}, raysubmitter.EnvSubmissionID},
		{"bad runtime env", map[string]string{raysubmitter.EnvDashboardAddress: addr, raysubmitter.EnvSubmissionID: "x"},
			[]string{"--runtime-env-json", "{", "--", "true"}, "--runtime-env-json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := submit(t, tc.vars, tc.args...)
			if code != 1 || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit %d, stderr %q; want 1 and a message naming %s (stdout %q)", code, errOut, tc.want, out)
			}
		})
	}
	if list, err := jobs.NewClient(addr).List(context.Background()); err != nil || len(list) != 0 {
		t.Errorf("jobs on the dashboard: %v (%v); want none", list, err)
	}
}
