package raysim

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
)

func TestWgetLikeKubeRayProbes(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/down" {
			http.Error(w, "nope", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("success"))
	}))
	defer srv.Close()

	run := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := Main(append([]string{WgetCommand}, args...), &out, &errb)
		return code, out.String(), errb.String()
	}
	if code, out, errs := run("--tries", "1", "-T", "2", "-q", "-O-", srv.URL+"/api/local_raylet_healthz"); code != 0 || out != "success" || errs != "" {
		t.Fatalf("probe: %d %q %q", code, out, errs)
	}
	if code, out, _ := run("-qO-", srv.URL); code != 0 || out != "success" {
		t.Fatalf("clustered flags: %d %q", code, out)
	}
	if code, _, errs := run("-q", "-O-", srv.URL+"/down"); code != 1 || errs == "" {
		t.Fatalf("HTTP 503 must fail: %d %q", code, errs)
	}
	if code, _, _ := run("-T", "1", "-q", "-O-", "http://"+closedPort(t)+"/"); code != 1 {
		t.Fatalf("refused connection must fail: %d", code)
	}
	file := filepath.Join(t.TempDir(), "out.txt")
	if code, _, _ := run("-q", "-O", file, srv.URL); code != 0 {
		t.Fatalf("-O FILE: %d", code)
	}
	if b, _ := os.ReadFile(file); string(b) != "success" {
		t.Fatalf("-O FILE wrote %q", b)
	}
	if code, _, _ := run("--spider", "-q", srv.URL); code != 0 {
		t.Fatalf("--spider: %d", code)
	}
}
