// Package raysubmitter is a RayJob submitter that needs no Python: what KubeRay v1.7's light-weight
// submitter image (quay.io/kuberay/submitter, command /submitter) does, written for rayctl. A RayJob
// selects it as it does under KubeRay, with a spec.submitterPodTemplate whose container runs that image's
// /submitter; rayctl's process runtime runs this code for it (rayctl invoked as `submitter`).
//
// Its behaviour is KubeRay's: the dashboard's address and the submission id come from the environment
// the RayJob controller gives every submitter (RAY_DASHBOARD_ADDRESS, RAY_JOB_SUBMISSION_ID; a token in
// RAY_AUTH_TOKEN for a cluster that requires one); the flags are `ray job submit`'s --runtime-env-json,
// --metadata-json, --entrypoint-resources, --entrypoint-num-cpus and --entrypoint-num-gpus; the
// arguments are the entrypoint, joined by spaces. It submits the job once (a submission id the
// dashboard already knows counts as submitted, so a retried submitter Pod never runs the job twice),
// then follows the job's logs over the dashboard's WebSocket until the dashboard ends the stream, and
// exits 0; any other failure exits 1. Like KubeRay's, it does not read the job's final status: the
// RayJob controller does.
package raysubmitter

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"

	"github.com/rayctl/rayctl/pkg/raysim/jobs"
)

// The environment the RayJob controller gives a submitter container.
const (
	EnvDashboardAddress = "RAY_DASHBOARD_ADDRESS"
	EnvSubmissionID     = "RAY_JOB_SUBMISSION_ID"
	EnvAuthToken        = "RAY_AUTH_TOKEN"
)

// Main runs the submitter with args (without the program's name) and the environment getenv reads,
// writing the job's logs to stdout and errors to stderr, and returns the exit code.
func Main(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if err := run(ctx, args, getenv, stdout); err != nil {
		fmt.Fprintln(stderr, "submitter:", err)
		return 1
	}
	return 0
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	fs := pflag.NewFlagSet("submitter", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	runtimeEnv := fs.String("runtime-env-json", "", "the job's runtime_env, as JSON")
	metadata := fs.String("metadata-json", "", "metadata to attach to the job, as a JSON object of strings")
	resources := fs.String("entrypoint-resources", "", "custom resources to reserve for the entrypoint, as a JSON object of numbers")
	cpus := fs.Float32("entrypoint-num-cpus", 0, "CPUs to reserve for the entrypoint")
	gpus := fs.Float32("entrypoint-num-gpus", 0, "GPUs to reserve for the entrypoint")
	if err := fs.Parse(args); err != nil {
		return err
	}
	address, id := getenv(EnvDashboardAddress), getenv(EnvSubmissionID)
	if address == "" {
		return fmt.Errorf("%s is not set", EnvDashboardAddress)
	}
	if id == "" {
		return fmt.Errorf("%s is not set", EnvSubmissionID)
	}
	req := jobs.SubmitRequest{Entrypoint: strings.Join(fs.Args(), " "), SubmissionID: id}
	for _, f := range []struct {
		flag, value string
		into        any
	}{{"--runtime-env-json", *runtimeEnv, &req.RuntimeEnv}, {"--metadata-json", *metadata, &req.Metadata}, {"--entrypoint-resources", *resources, &req.EntrypointResources}} {
		if f.value == "" {
			continue
		}
		if err := json.Unmarshal([]byte(f.value), f.into); err != nil {
			return fmt.Errorf("%s: %w", f.flag, err)
		}
	}
	if *cpus > 0 {
		v := float64(*cpus)
		req.EntrypointNumCPUs = &v
	}
	if *gpus > 0 {
		v := float64(*gpus)
		req.EntrypointNumGPUs = &v
	}
	if !strings.Contains(address, "://") {
		address = "http://" + address
	}
	c := jobs.NewClient(address)
	c.Token = getenv(EnvAuthToken)
	_, err := c.Submit(ctx, req)
	switch {
	case err == nil:
		fmt.Fprintf(stdout, "submitted Ray job %s to %s\n", id, address)
	case jobs.IsAlreadySubmitted(err):
		fmt.Fprintf(stdout, "Ray job %s was submitted before; following its logs\n", id)
	default:
		return fmt.Errorf("submitting Ray job %s to %s: %w", id, address, err)
	}
	if err := c.Tail(ctx, id, func(msg string) { _, _ = io.WriteString(stdout, msg) }); err != nil {
		return fmt.Errorf("following the logs of Ray job %s: %w", id, err)
	}
	fmt.Fprintf(stdout, "Ray job %s ended\n", id)
	return nil
}
