package raydashboard_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/rayctl/rayctl/pkg/raydashboard"
	"github.com/rayctl/rayctl/pkg/raysim/node"
	"github.com/rayctl/rayctl/test/e2e/framework"
)

func startHead(t *testing.T) string {
	t.Helper()
	h, err := node.StartHead(node.HeadConfig{BindHost: "127.0.0.1", NodeIP: "127.0.0.1", TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h.DashboardURL()
}

// Against raysim's dashboard, which speaks Ray's Jobs API.
func TestClientAgainstRaysim(t *testing.T) {
	c := raydashboard.New(startHead(t))
	ctx := context.Background()

	if _, err := c.GetJobInfo(ctx, "nope"); !raydashboard.IsNotFound(err) {
		t.Fatalf("GetJobInfo(unknown) = %v, want not found", err)
	}
	id, err := c.SubmitJob(ctx, raydashboard.SubmitRequest{Entrypoint: "echo hi && exit 3", SubmissionID: "job-1"})
	if err != nil || id != "job-1" {
		t.Fatalf("SubmitJob = %q, %v", id, err)
	}
	_, err = c.SubmitJob(ctx, raydashboard.SubmitRequest{Entrypoint: "true", SubmissionID: "job-1"})
	if !raydashboard.IsAlreadySubmitted(err) {
		t.Fatalf("second SubmitJob = %v, want already submitted", err)
	}
	var info *raydashboard.JobInfo
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if info, err = c.GetJobInfo(ctx, "job-1"); err != nil {
			t.Fatal(err)
		}
		if info.Status == raydashboard.StatusFailed {
			break
		}
	}
	if info.Status != raydashboard.StatusFailed || info.Text() == "" || info.EndTime == nil {
		t.Fatalf("job info %+v (message %q)", info, info.Text())
	}
	if err := c.StopJob(ctx, "job-1"); err != nil {
		t.Errorf("StopJob(ended job) = %v, want nil", err)
	}
	if err := c.StopJob(ctx, "unknown"); err != nil {
		t.Errorf("StopJob(unknown job) = %v, want nil", err)
	}
}

// Ray (and raysim) answer a reused submission_id with HTTP 500.
func TestAlreadySubmittedOn500(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "Job with submission_id x already exists. Please use a different submission_id.", http.StatusInternalServerError)
	}))
	defer srv.Close()
	_, err := raydashboard.New(srv.URL).SubmitJob(context.Background(), raydashboard.SubmitRequest{Entrypoint: "true", SubmissionID: "x"})
	if !raydashboard.IsAlreadySubmitted(err) || raydashboard.IsNotFound(err) {
		t.Fatalf("err = %v", err)
	}
}

// A dashboard that accepts the connection but never answers costs at most RequestTimeout.
func TestRequestTimeout(t *testing.T) {
	addr := framework.SilentServer(t)
	start := time.Now()
	_, err := raydashboard.New("http://"+addr).GetJobInfo(context.Background(), "x")
	if err == nil {
		t.Fatal("no error from a silent dashboard")
	}
	if took := time.Since(start); took < raydashboard.RequestTimeout-time.Second || took > raydashboard.RequestTimeout+2*time.Second {
		t.Errorf("gave up after %v, want about %v", took, raydashboard.RequestTimeout)
	}
}

func TestBaseURLGetsAScheme(t *testing.T) {
	if got := raydashboard.New("demo-head-svc.default.svc.cluster.local:8265/").BaseURL(); got != "http://demo-head-svc.default.svc.cluster.local:8265" {
		t.Errorf("BaseURL = %q", got)
	}
}
