package e2e

// Load: 50 concurrent clients write (create, update and delete ConfigMaps; patch Pods' status) for a
// bounded time while watchers follow both kinds, on an instance of its own. The test asserts that no
// request failed and that every watch saw every write; it logs ops/s, the p50/p99 latency of mutating
// calls and the rayctl process' RSS (before, peak, after), and never fails on a latency: a benchmark, not
// a timed test. RAYCTL_LOAD_SECONDS sets the write phase (15 s by default; `make bench` runs 60 s, see
// bench/load.go).

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rayctl/rayctl/test/e2e/framework"
	"github.com/rayctl/rayctl/test/loadgen"
)

func TestLoad(t *testing.T) {
	t.Parallel()
	seconds := 15
	if s := os.Getenv("RAYCTL_LOAD_SECONDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			t.Fatalf("RAYCTL_LOAD_SECONDS=%q: want a positive number of seconds", s)
		}
		seconds = n
	}
	in, err := framework.Start("", framework.ControlPlaneOnly()...)
	if err != nil {
		t.Fatalf("starting rayctl: %v", err)
	}
	t.Cleanup(func() { in.Cleanup(t) })
	ctx, cancel := context.WithTimeout(t.Context(), time.Duration(seconds)*time.Second+3*time.Minute)
	defer cancel()

	r, err := loadgen.Run(ctx, in.Config, in.Cmd.Process.Pid, time.Duration(seconds)*time.Second, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("load: %d clients for %s: %d mutating requests (%.0f ops/s), p50 %s, p99 %s (SLO ≤ 1 s: %s), max %s",
		loadgen.Clients, r.Duration.Round(time.Millisecond), r.Ops, r.OpsPerSec(), r.P50, r.P99, r.SLOVerdict(), r.Max)
	t.Logf("load: watch events received %d of %d expected (%d watchers, %d resumed after the server closed them); rayctl RSS before %.0f MB, peak %.0f MB, after %.0f MB",
		r.EventsGot, r.EventsWant, 2*loadgen.Watchers, r.Resumes, r.RSSBefore, r.RSSPeak, r.RSSAfter)
	if r.Errors > 0 {
		t.Errorf("%d requests failed; first: %v", r.Errors, r.FirstErr)
	}
	for _, w := range r.Watchers {
		if w.Got != w.Want {
			t.Errorf("watcher %s saw %d events, want %d (one per write)", w.Name, w.Got, w.Want)
		}
	}
	if r.Resumes > 0 {
		// Say why the server ended watches (kube-apiserver's watch cache logs it).
		if b, err := os.ReadFile(in.DataDir + "/rayctl.log"); err == nil {
			for _, line := range strings.Split(string(b), "\n") {
				if strings.Contains(line, "Forcing") || strings.Contains(line, "watcher close") {
					t.Logf("load: rayctl.log: %s", line)
					break
				}
			}
		}
	}
	// Memory must stay bounded; the bound is generous (a leak or an unbounded cache, not a regression test).
	if r.RSSPeak > 2048 {
		t.Errorf("rayctl RSS peaked at %.0f MB under load, want < 2048 MB", r.RSSPeak)
	}
}
