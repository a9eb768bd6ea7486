package raysim

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/rayctl/rayctl/pkg/raysim/jobs"
	"github.com/rayctl/rayctl/pkg/raysim/node"
)

// resolveDashboard finds the Jobs API URL: the flag, else
// $RAY_API_SERVER_ADDRESS, $RAY_DASHBOARD_ADDRESS, $RAY_ADDRESS. A URL is used
// as is; HOST:PORT is a GCS address whose dashboard the GCS names (falling
// back to http://HOST:PORT); "auto" or nothing means the head on this machine. token is sent to the GCS.
func resolveDashboard(flagAddr, token string) (string, error) {
	addr := flagAddr
	for _, env := range []string{"RAY_API_SERVER_ADDRESS", "RAY_DASHBOARD_ADDRESS", "RAY_ADDRESS"} {
		if addr != "" {
			break
		}
		addr = os.Getenv(env)
	}
	if strings.Contains(addr, "://") {
		return strings.TrimRight(addr, "/"), nil
	}
	if addr == "" || addr == "auto" {
		if info, err := node.ReadHeadInfo(localTempDir()); err == nil {
			return info.DashboardURL, nil
		}
		return fmt.Sprintf("http://127.0.0.1:%d", defaultDashboardPort), nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if info, err := newGCSClient(withDefaultPort(addr, defaultGCSPort), token).Info(ctx); err == nil && info.DashboardURL != "" {
		return info.DashboardURL, nil
	}
	return "http://" + addr, nil
}

var safeWord = regexp.MustCompile(`^[A-Za-z0-9@%+=:,./_-]+$`)

// shellJoin quotes words so that /bin/sh sees them as they are, the way
// `ray job submit -- CMD…` turns its trailing words into one entrypoint.
func shellJoin(words []string) string {
	out := make([]string, len(words))
	for i, w := range words {
		if safeWord.MatchString(w) {
			out[i] = w
		} else {
			out[i] = "'" + strings.ReplaceAll(w, "'", `'"'"'`) + "'"
		}
	}
	return strings.Join(out, " ")
}

func jobUsage(w io.Writer) {
	fmt.Fprint(w, `Usage: ray job COMMAND [ARGS]...

Commands:
  submit [--address URL] [--submission-id ID] [--no-wait] [--runtime-env-json JSON]
         [--metadata-json JSON] [--working-dir DIR] [--entrypoint-num-cpus N]
         [--entrypoint-num-gpus N] [--entrypoint-memory BYTES] [--entrypoint-resources JSON] -- CMD...
  status ID    logs ID [--follow]    stop ID [--no-wait]    list    delete ID
The address also comes from RAY_API_SERVER_ADDRESS, RAY_DASHBOARD_ADDRESS or RAY_ADDRESS.
`)
}

func cmdJob(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "--help" || args[0] == "-h" || args[0] == "help" {
		jobUsage(stdout)
		return 0
	}
	sub := args[0]
	f := newFlagSet("job "+sub, stderr).value("address", "headers", "verify", "log-style", "log-color")
	switch sub {
	case "submit":
		f.value("submission-id", "job-id", "runtime-env", "runtime-env-json", "working-dir", "metadata-json",
			"entrypoint-num-cpus", "entrypoint-num-gpus", "entrypoint-memory", "entrypoint-resources", "entrypoint-label-selector").
			boolean("no-wait")
		f.entrypointAfterArg = true
	case "logs":
		f.boolean("follow")
		f.short["f"] = "follow"
	case "stop":
		f.boolean("no-wait")
	case "status", "list", "delete":
	default:
		fmt.Fprintf(stderr, "raysim: unknown job command %q\n", sub)
		jobUsage(stderr)
		return 2
	}
	if err := f.parse(args[1:]); err != nil {
		fmt.Fprintln(stderr, "raysim:", err)
		return 2
	}
	for _, ignored := range []string{"headers", "verify", "runtime-env", "entrypoint-label-selector"} {
		if f.has(ignored) {
			fmt.Fprintf(stderr, "raysim: warning: ray job %s: ignoring --%s (not implemented by raysim)\n", sub, ignored)
		}
	}
	token, ok := clientToken(stderr)
	if !ok {
		return 1
	}
	base, err := resolveDashboard(f.str("address"), token)
	if err != nil {
		fmt.Fprintln(stderr, "raysim:", err)
		return 1
	}
	c := jobs.NewClient(base)
	c.Token = token
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// Ray's job client checks the server's version before anything else, so a refused token or an
	// unreachable dashboard ends the command before it names the address.
	if _, err := c.Version(ctx); err != nil {
		if !jobs.IsHTTPError(err) {
			err = fmt.Errorf("Failed to connect to Ray at address: %s. (%v)", base, err)
		}
		fmt.Fprintln(stderr, "raysim:", err)
		return 1
	}
	fmt.Fprintf(stdout, "Job submission server address: %s\n", base)

	needID := func() (string, bool) {
		if len(f.args) != 1 {
			fmt.Fprintf(stderr, "raysim: ray job %s takes exactly one job id\n", sub)
			return "", false
		}
		return f.args[0], true
	}
	switch sub {
	case "submit":
		return jobSubmit(ctx, c, f, stdout, stderr)
	case "status":
		id, ok := needID()
		if !ok {
			return 2
		}
		if _, err := printJobStatus(ctx, c, id, stdout); err != nil {
			fmt.Fprintln(stderr, "raysim:", err)
			return 1
		}
		return 0
	case "logs":
		id, ok := needID()
		if !ok {
			return 2
		}
		if f.isSet("follow") {
			if err := tailJob(ctx, c, id, stdout, stderr); err != nil {
				fmt.Fprintln(stderr, "raysim:", err)
				return 1
			}
			if _, err := printJobStatus(ctx, c, id, stdout); err != nil {
				fmt.Fprintln(stderr, "raysim:", err)
				return 1
			}
			return 0
		}
		logs, err := c.Logs(ctx, id)
		if err != nil {
			fmt.Fprintln(stderr, "raysim:", err)
			return 1
		}
		fmt.Fprint(stdout, logs)
		return 0
	case "stop":
		id, ok := needID()
		if !ok {
			return 2
		}
		fmt.Fprintf(stdout, "Attempting to stop job '%s'\n", id)
		if _, err := c.Stop(ctx, id); err != nil {
			fmt.Fprintln(stderr, "raysim:", err)
			return 1
		}
		if f.isSet("no-wait") {
			return 0
		}
		fmt.Fprintf(stdout, "Waiting for job '%s' to exit (disable with --no-wait):\n", id)
		for {
			d, err := c.Get(ctx, id)
			if err != nil {
				fmt.Fprintln(stderr, "raysim:", err)
				return 1
			}
			if d.Status.IsTerminal() {
				_, _ = printJobStatus(ctx, c, id, stdout)
				return 0
			}
			fmt.Fprintf(stdout, "Job has not exited yet. Status: %s\n", d.Status)
			select {
			case <-ctx.Done():
				return 1
			case <-time.After(time.Second):
			}
		}
	case "list":
		list, err := c.List(ctx)
		if err != nil {
			fmt.Fprintln(stderr, "raysim:", err)
			return 1
		}
		fmt.Fprintln(stdout, pyJobList(list))
		return 0
	case "delete":
		id, ok := needID()
		if !ok {
			return 2
		}
		if _, err := c.Delete(ctx, id); err != nil {
			fmt.Fprintln(stderr, "raysim:", err)
			return 1
		}
		fmt.Fprintf(stdout, "Job '%s' deleted successfully\n", id)
		return 0
	}
	return 2
}

func jobSubmit(ctx context.Context, c *jobs.Client, f *flagSet, stdout, stderr io.Writer) int {
	if len(f.rest) == 0 {
		fmt.Fprintln(stderr, "raysim: ray job submit needs an entrypoint: ray job submit [OPTIONS] -- CMD...")
		return 2
	}
	// Ray's CLI always sends a runtime_env and metadata, empty ones when not given.
	req := jobs.SubmitRequest{Entrypoint: shellJoin(f.rest), SubmissionID: f.str("submission-id"),
		RuntimeEnv: map[string]any{}, Metadata: map[string]string{}}
	if req.SubmissionID == "" && f.str("job-id") != "" {
		fmt.Fprintln(stderr, "raysim: warning: --job-id is deprecated; use --submission-id")
		req.SubmissionID = f.str("job-id")
	}
	if s := f.str("runtime-env-json"); s != "" {
		if err := json.Unmarshal([]byte(s), &req.RuntimeEnv); err != nil {
			fmt.Fprintln(stderr, "raysim: --runtime-env-json is not a JSON object:", err)
			return 2
		}
	}
	if wd := f.str("working-dir"); wd != "" {
		if !strings.Contains(wd, "://") {
			if abs, err := filepath.Abs(wd); err == nil {
				wd = abs
			}
		}
		req.RuntimeEnv["working_dir"] = wd
	}
	if s := f.str("metadata-json"); s != "" {
		if err := json.Unmarshal([]byte(s), &req.Metadata); err != nil {
			fmt.Fprintln(stderr, "raysim: --metadata-json must be a JSON object of strings:", err)
			return 2
		}
	}
	for _, q := range []struct {
		name string
		dst  **float64
	}{{"entrypoint-num-cpus", &req.EntrypointNumCPUs}, {"entrypoint-num-gpus", &req.EntrypointNumGPUs}} {
		v, ok, err := f.floatValue(q.name)
		if err != nil {
			fmt.Fprintln(stderr, "raysim:", err)
			return 2
		}
		if ok {
			*q.dst = &v
		}
	}
	if v, ok, err := f.floatValue("entrypoint-memory"); err != nil {
		fmt.Fprintln(stderr, "raysim:", err)
		return 2
	} else if ok {
		m := int64(v)
		req.EntrypointMemory = &m
	}
	if s := f.str("entrypoint-resources"); s != "" {
		if err := json.Unmarshal([]byte(s), &req.EntrypointResources); err != nil {
			fmt.Fprintln(stderr, "raysim: --entrypoint-resources must be a JSON object of numbers:", err)
			return 2
		}
	}
	resp, err := c.Submit(ctx, req)
	if err != nil {
		fmt.Fprintln(stderr, "raysim:", err)
		return 1
	}
	id := resp.SubmissionID
	boxed(stdout, fmt.Sprintf("Job '%s' submitted successfully", id))
	fmt.Fprintf(stdout, "Next steps\nQuery the logs of the job:\nray job logs %s\nQuery the status of the job:\nray job status %s\nRequest the job to be stopped:\nray job stop %s\n", id, id, id)
	if f.isSet("no-wait") {
		return 0
	}
	fmt.Fprintln(stdout, "Tailing logs until the job exits (disable with --no-wait):")
	if err := tailJob(ctx, c, id, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, "raysim:", err)
		return 1
	}
	st, err := printJobStatus(ctx, c, id, stdout)
	if err != nil {
		fmt.Fprintln(stderr, "raysim:", err)
		return 1
	}
	if st == jobs.StatusFailed {
		return 1
	}
	return 0
}

// tailJob streams a job's logs to stdout until it ends, then says on stderr that the stream closed,
// as Ray's CLI does.
func tailJob(ctx context.Context, c *jobs.Client, id string, stdout, stderr io.Writer) error {
	if err := c.Tail(ctx, id, func(s string) { fmt.Fprint(stdout, s) }); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "WebSocket closed for job %s with close code 1000\n", id)
	return nil
}

// boxed prints msg between two rules of its length, as Ray's CLI frames its outcomes.
func boxed(w io.Writer, msg string) {
	rule := strings.Repeat("-", len(msg))
	fmt.Fprintf(w, "%s\n%s\n%s\n", rule, msg, rule)
}

// printJobStatus prints a job's status in the words of Ray's `ray job status`.
func printJobStatus(ctx context.Context, c *jobs.Client, id string, w io.Writer) (jobs.Status, error) {
	d, err := c.Get(ctx, id)
	if err != nil {
		return "", err
	}
	msg := ""
	if d.Message != nil {
		msg = *d.Message
	}
	switch d.Status {
	case jobs.StatusSucceeded:
		boxed(w, fmt.Sprintf("Job '%s' succeeded", id))
	case jobs.StatusStopped:
		fmt.Fprintf(w, "Job '%s' was stopped\n", id)
	case jobs.StatusFailed:
		boxed(w, fmt.Sprintf("Job '%s' failed", id))
		fmt.Fprintf(w, "Status message: %s\n", msg)
	default:
		fmt.Fprintf(w, "Status for job '%s': %s\nStatus message: %s\n", id, d.Status, msg)
	}
	return d.Status, nil
}
