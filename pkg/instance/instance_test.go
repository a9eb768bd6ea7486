package instance

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLinesThrough(t *testing.T) {
	const want = "ready in 1234 ms"
	for _, c := range []struct {
		out   string
		ok    bool
		lines int
	}{
		{"", false, 0},
		{"ready in 1234 ms", false, 0}, // not a whole line yet
		{"ready in 1234 ms\n", true, 1},
		{"  etcd 40 ms\n  apiserver 900 ms\nready in 1234 ms\nkubeconfig: x\n", true, 3},
		{"listen tcp: address already in use; ready in 1234 ms\n", false, 0}, // not a line of its own
		{"ready in 12 ms\n", false, 0},                                       // another start's
	} {
		lines, ok := linesThrough(c.out, want)
		if ok != c.ok || len(lines) != c.lines {
			t.Errorf("linesThrough(%q) = %q, %v; want %d lines, %v", c.out, lines, ok, c.lines, c.ok)
		}
	}
}

// writeState is shell that writes the data dir's state file ($3 is the data dir: up --data-dir DIR)
// saying rayctl got ready in ms, as `rayctl up` does before it prints its ready line.
func writeState(ms int) string {
	return fmt.Sprintf(`printf '{"pid": %%d, "server": "https://127.0.0.1:1", "readyMillis": %d}' $$ > "$3/rayctl.state"`, ms)
}

// script writes an executable shell script that stands in for rayctl.
func script(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "rayctl")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestStartWaitsForReadyAndStops(t *testing.T) {
	bin := script(t, `trap 'echo stopping; exit 0' TERM; echo "args: $*"; echo "  etcd 3 ms"; sleep 0.2; `+writeState(250)+`; echo "ready in 250 ms"; while :; do sleep 0.05; done`)
	dir := t.TempDir()
	// A killed instance's state file, which this start replaces.
	if err := os.WriteFile(filepath.Join(dir, "rayctl.state"), []byte(`{"pid": 1, "readyMillis": 7}`), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := Start(context.Background(), Options{Binary: bin, DataDir: dir, Args: []string{"--port", "0"}})
	if err != nil {
		t.Fatal(err)
	}
	if p.Reported != 250*time.Millisecond || len(p.Startup) != 3 || p.Startup[0] != "args: up --data-dir "+dir+" --port 0" {
		t.Errorf("Reported %v, Startup %q", p.Reported, p.Startup)
	}
	if p.Kubeconfig() != filepath.Join(dir, "kubeconfig") {
		t.Errorf("Kubeconfig() = %s", p.Kubeconfig())
	}
	if err := p.Stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if code := p.Cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit code %d after SIGTERM", code)
	}
}

func TestStartFailsWhenTheProcessExitsFirst(t *testing.T) {
	bin := script(t, `echo "listen tcp 127.0.0.1:6443: bind: address already in use"; exit 1`)
	_, err := Start(context.Background(), Options{Binary: bin, DataDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "exited before ready") || !strings.Contains(err.Error(), "address already in use") {
		t.Errorf("err = %v, want exited before ready with the output", err)
	}
}

func TestStartTimesOutAndKills(t *testing.T) {
	bin := script(t, `trap '' TERM; echo starting; while :; do sleep 0.05; done`)
	dir := t.TempDir()
	// A killed instance's state file does not make this one ready.
	if err := os.WriteFile(filepath.Join(dir, "rayctl.state"), []byte(`{"pid": 1, "readyMillis": 7}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Start(context.Background(), Options{Binary: bin, DataDir: dir, ReadyTimeout: 300 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "not ready after") {
		t.Errorf("err = %v, want not ready after", err)
	}
}

func TestStartDetachedReadsTheLog(t *testing.T) {
	bin := script(t, writeState(9)+`; echo "ready in 9 ms"; sleep 30`)
	log, err := os.Create(filepath.Join(t.TempDir(), "rayctl.out"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	p, err := Start(context.Background(), Options{Binary: bin, DataDir: t.TempDir(), Log: log, Detach: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill()
	if p.Reported != 9*time.Millisecond || !strings.Contains(p.Text(), "ready in 9 ms") {
		t.Errorf("Reported %v, text %q", p.Reported, p.Text())
	}
}

func TestOwnNetwork(t *testing.T) {
	a, b := OwnNetwork(nil), OwnNetwork([]string{"--bridge=br0"})
	if len(a) != 4 || a[0] != "--pod-cidr" || a[2] != "--bridge" {
		t.Fatalf("OwnNetwork(nil) = %q", a)
	}
	if len(b) != 3 || b[1] != "--pod-cidr" || b[2] == a[1] {
		t.Errorf("OwnNetwork(--bridge=br0) = %q (first took %s)", b, a[1])
	}
}
