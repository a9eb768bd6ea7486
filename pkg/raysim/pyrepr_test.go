package raysim

import (
	"testing"

	"github.com/rayctl/rayctl/pkg/raysim/jobs"
)

// TestPyJobListPrintsAsRay compares with what Ray 2.60's `ray job list` printed for a failed job
// submitted through its CLI (the message shortened).
func TestPyJobListPrintsAsRay(t *testing.T) {
	s := func(v string) *string { return &v }
	n := func(v int64) *int64 { return &v }
	code := 4
	d := jobs.Details{Type: jobs.TypeSubmission, SubmissionID: s("cli2"), Status: jobs.StatusFailed, Entrypoint: "sh -c 'echo x; exit 4'",
		Message: s("failed:\nx\n"), ErrorType: s("JOB_ENTRYPOINT_COMMAND_ERROR"), StartTime: n(1796168674697), EndTime: n(1796168677494),
		Metadata: map[string]string{}, RuntimeEnv: map[string]any{}, DriverAgentHTTPAddress: s("http://10.213.77.2:52365"),
		DriverNodeID: s("656010e2"), DriverExitCode: &code}
	want := `[JobDetails(type=<JobType.SUBMISSION: 'SUBMISSION'>, job_id=None, submission_id='cli2', driver_info=None, status=<JobStatus.FAILED: 'FAILED'>, entrypoint="sh -c 'echo x; exit 4'", message='failed:\nx\n', error_type='JOB_ENTRYPOINT_COMMAND_ERROR', start_time=1796168674697, end_time=1796168677494, metadata={}, runtime_env={}, driver_agent_http_address='http://10.213.77.2:52365', driver_node_id='656010e2', driver_exit_code=4),` +
		"\n" + ` JobDetails(type=<JobType.SUBMISSION: 'SUBMISSION'>, job_id=None, submission_id=None, driver_info=None, status=<JobStatus.PENDING: 'PENDING'>, entrypoint='it\'s "q"', message=None, error_type=None, start_time=None, end_time=None, metadata=None, runtime_env={'env_vars': {'A': '1'}, 'n': 2}, driver_agent_http_address=None, driver_node_id=None, driver_exit_code=None)]`
	other := jobs.Details{Type: jobs.TypeSubmission, Status: jobs.StatusPending, Entrypoint: `it's "q"`,
		RuntimeEnv: map[string]any{"n": float64(2), "env_vars": map[string]any{"A": "1"}}}
	if got := pyJobList([]jobs.Details{d, other}); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if got := pyJobList(nil); got != "[]" {
		t.Errorf("empty list: %s", got)
	}
}
