package datadir

import (
	"errors"
	"os"
	"testing"
)

// A state file left by an instance that no longer runs is no running instance, but LastState still reads
// it; the ready line says the time it records.
func TestStateOutlivesItsProcess(t *testing.T) {
	d, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.LastState(); !errors.Is(err, ErrNotRunning) {
		t.Errorf("LastState with no state file: %v, want ErrNotRunning", err)
	}
	if err := d.WriteState(State{PID: os.Getpid(), Server: "https://127.0.0.1:1", ReadyMillis: 1234}); err != nil {
		t.Fatal(err)
	}
	if s, err := d.ReadState(); err != nil || s.ReadyMillis != 1234 {
		t.Errorf("ReadState: %+v, %v", s, err)
	}
	gone := State{PID: 1 << 30, ReadyMillis: 1234}
	if err := d.WriteState(gone); err != nil {
		t.Fatal(err)
	}
	if _, err := d.ReadState(); !errors.Is(err, ErrNotRunning) {
		t.Errorf("ReadState of a process that is gone: %v, want ErrNotRunning", err)
	}
	if s, err := d.LastState(); err != nil || s.PID != gone.PID {
		t.Errorf("LastState: %+v, %v", s, err)
	}
	if got := gone.ReadyLine(); got != "ready in 1234 ms" {
		t.Errorf("ReadyLine() = %q", got)
	}
}
