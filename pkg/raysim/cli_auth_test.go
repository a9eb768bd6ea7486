package raysim

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestTokenAuthCluster: a head and a worker started with RAY_AUTH_MODE=token and RAY_AUTH_TOKEN, as
// KubeRay's authOptions start them, form a cluster; `ray` commands with the token work, without it
// (or with another) they fail, and the dashboard answers plain HTTP as Ray 2.60's does.
func TestTokenAuthCluster(t *testing.T) {
	c := newCluster(t, "RAY_AUTH_MODE=token", "RAY_AUTH_TOKEN=s3cret")
	_, info := c.startHead()
	c.spawn(nil, "start", "--address="+info.GCSAddress, "--block", "--num-cpus=1", "--dashboard-agent-listen-port=0",
		"--metrics-export-port=0", "--temp-dir="+c.tempDir)
	waitFor(t, 30*time.Second, "the worker to show up in ray status", func() bool {
		r := c.ray(nil, "status", "--address", info.GCSAddress)
		return r.code == 0 && countAlive(r.stdout) == 2
	})
	if r := c.ray(nil, "health-check", "--address", info.GCSAddress); r.code != 0 {
		t.Fatalf("health-check with the token: %+v", r)
	}
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := c.ray([]string{"RAY_AUTH_TOKEN=", "RAY_AUTH_TOKEN_PATH=" + tokenFile}, "health-check", "--address", info.GCSAddress); r.code != 0 {
		t.Fatalf("health-check with RAY_AUTH_TOKEN_PATH: %+v", r)
	}
	viaURL := "RAY_ADDRESS=" + info.DashboardURL
	r := c.ray([]string{viaURL}, "job", "submit", "--submission-id=authed", "--", "echo", "hello")
	if r.code != 0 || !strings.Contains(r.stdout, "hello\n") || !strings.Contains(r.stdout, "Job 'authed' succeeded") {
		t.Fatalf("job submit with the token: %+v", r)
	}
	// Through the GCS address too (the dashboard's URL is asked of the GCS, with the token).
	if r := c.ray(nil, "job", "status", "--address", info.GCSAddress, "authed"); r.code != 0 || !strings.Contains(r.stdout, "succeeded") {
		t.Fatalf("job status through the GCS address: %+v", r)
	}

	// Without the token, with another one, or in token mode with none to be found, clients fail.
	noToken := []string{"RAY_AUTH_TOKEN=", "HOME=" + t.TempDir()}
	for _, tc := range []struct {
		name string
		env  []string
		want string
	}{
		{"no auth mode", []string{"RAY_AUTH_MODE="}, "401"},
		{"auth mode disabled", []string{"RAY_AUTH_MODE=disabled"}, "401"},
		{"a wrong token", []string{"RAY_AUTH_TOKEN=wrong"}, "403"},
		{"no token found", noToken, "no authentication token was found"},
	} {
		env := append([]string{viaURL}, tc.env...)
		if r := c.ray(env, "job", "submit", "--no-wait", "--", "true"); r.code == 0 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("job submit, %s: %+v; want a failure saying %q", tc.name, r, tc.want)
		}
		if r := c.ray(env, "job", "list"); r.code == 0 {
			t.Errorf("job list, %s: %+v", tc.name, r)
		}
		if r := c.ray(tc.env, "health-check", "--address", info.GCSAddress); r.code != 1 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("health-check, %s: %+v; want exit 1 saying %q", tc.name, r, tc.want)
		}
		if r := c.ray(tc.env, "status", "--address", info.GCSAddress); r.code == 0 {
			t.Errorf("status, %s: %+v", tc.name, r)
		}
	}
	if r := c.ray(noToken, "start", "--head", "--temp-dir="+t.TempDir()); r.code != 1 || !strings.Contains(r.stderr, "RAY_AUTH_TOKEN") {
		t.Errorf("ray start --head in token mode without a token: %+v", r)
	}
	// A worker with another token is turned away at once, not after the reconnect timeout.
	start := time.Now()
	r = c.ray([]string{"RAY_AUTH_TOKEN=wrong"}, "start", "--address="+info.GCSAddress, "--block", "--dashboard-agent-listen-port=0",
		"--metrics-export-port=0", "--temp-dir="+c.tempDir)
	if r.code == 0 || !strings.Contains(r.stderr, "403") || time.Since(start) > 30*time.Second {
		t.Errorf("worker with a wrong token: %+v after %s", r, time.Since(start))
	}

	// Plain HTTP, as KubeRay's probes and submitters see the dashboard.
	call := func(method, path string, header map[string]string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, info.DashboardURL+path, strings.NewReader(`{"entrypoint": "true"}`))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := call("POST", "/api/jobs/", nil); code != 401 || body != "Unauthorized: Missing authentication token" {
		t.Errorf("POST /api/jobs/ without a token: %d %q", code, body)
	}
	if code, body := call("POST", "/api/jobs/", map[string]string{"Authorization": "Bearer wrong"}); code != 403 {
		t.Errorf("POST /api/jobs/ with a wrong token: %d %q", code, body)
	}
	if code, body := call("GET", "/api/gcs_healthz", nil); code != 200 || body != "success" {
		t.Errorf("GET /api/gcs_healthz without a token: %d %q", code, body)
	}
	if code, body := call("GET", "/api/jobs/", map[string]string{"X-Ray-Authorization": "Bearer s3cret"}); code != 200 || !strings.Contains(body, "authed") {
		t.Errorf("GET /api/jobs/ with X-Ray-Authorization: %d %q", code, body)
	}
	if code, body := call("GET", "/api/cluster_status", map[string]string{"Cookie": "ray-authentication-token=s3cret"}); code != 200 {
		t.Errorf("GET /api/cluster_status with the cookie: %d %q", code, body)
	}
}
