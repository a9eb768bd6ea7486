package process

import (
	"strings"
	"testing"
	"time"

	"github.com/rayctl/rayctl/pkg/runtime"
)

func TestContainersEndWithRuntimeKillsWhatAnEarlierRuntimeLeft(t *testing.T) {
	f := newFixture(t)
	sb := f.pod(t, "leftover")
	id, logPath := f.run(t, f.r, sb, sh("left", "echo ready; exec sleep 1000"))
	waitLog(t, logPath, "ready")
	rec, err := f.r.load(id)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.r.Close(); err != nil { // a Runtime without the option leaves it running
		t.Fatal(err)
	}
	if !sameProcess(rec.Pid, rec.StartTicks) {
		t.Fatal("Close ended the container")
	}
	f.opts.ContainersEndWithRuntime = true
	second := f.open(t)
	s, err := second.ContainerStatus(testCtx(t), id)
	if err != nil || s.State != runtime.StateExited || s.ExitCode != 137 || !strings.Contains(s.Message, "restarted") {
		t.Errorf("the leftover after New: %+v %v", s, err)
	}
	if sameProcess(rec.Pid, rec.StartTicks) {
		t.Error("the leftover still runs")
	}
}

func TestContainersEndWithRuntimeStopsThemOnClose(t *testing.T) {
	f := newFixtureWith(t, func(o *Options) { o.ContainersEndWithRuntime = true })
	sb := f.pod(t, "ending")
	polite, politeLog := f.run(t, f.r, sb, sh("polite", "echo ready; exec sleep 1000"))
	stubborn, stubbornLog := f.run(t, f.r, sb, sh("stubborn", `trap '' TERM; echo ready; while true; do sleep 0.05; done`))
	waitLog(t, politeLog, "ready")
	waitLog(t, stubbornLog, "ready")
	start := time.Now()
	if err := f.r.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < endGrace || d > endGrace+10*time.Second {
		t.Errorf("Close took %s (grace %s)", d, endGrace)
	}
	second := f.open(t)
	for id, code := range map[string]int{polite: 143, stubborn: 137} {
		if s, err := second.ContainerStatus(testCtx(t), id); err != nil || s.State != runtime.StateExited || s.ExitCode != code {
			t.Errorf("%s after Close: %+v %v (want exit %d)", id, s, err, code)
		}
	}
}
