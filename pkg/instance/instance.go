// Package instance starts `rayctl up` as a child process on a data dir and waits until it is ready: its
// state file in the data dir (rayctl.state, see datadir.State) records the start-up, and its output holds
// the ready line it prints after writing it (datadir.State.ReadyLine). It stops, kills and restarts it
// and hands out the admin REST config its kubeconfig holds. The end-to-end tests (through
// test/e2e/framework), bench and `rayctl up --detach` start rayctl through it. It does not depend on
// package testing.
package instance

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/rayctl/rayctl/pkg/datadir"
	"github.com/rayctl/rayctl/pkg/procstop"
)

// DefaultReadyTimeout bounds the wait for readiness when Options.ReadyTimeout is zero.
const DefaultReadyTimeout = 3 * time.Minute

// Options say which `rayctl up` to start and how.
type Options struct {
	// Binary is the rayctl executable.
	Binary string
	// DataDir is the instance's data dir, passed as --data-dir.
	DataDir string
	// Args follow `up --data-dir DataDir`, e.g. "--port", "0".
	Args []string
	// Env is added to this process's environment ("KEY=value").
	Env []string
	// Log, when set, receives the output in place of memory: a file outlives this process, as a
	// detached instance's output must. The ready line is then read back from it.
	Log *os.File
	// Detach starts the process in a session of its own, so that it outlives this process and its
	// terminal; otherwise it runs in a process group of its own. Kill ends either whole.
	Detach bool
	// ReadyTimeout bounds the wait for readiness (DefaultReadyTimeout when zero).
	ReadyTimeout time.Duration
	// Credential, when set, runs the process as that user (a root caller only): the tests and bench
	// start rayctl as an ordinary user that way.
	Credential *syscall.Credential
}

// Process is one running `rayctl up`.
type Process struct {
	// Cmd is the running process; its ProcessState is set once Exited is closed.
	Cmd *exec.Cmd
	// Output holds what the process printed (empty when Options.Log took it).
	Output *Buffer
	// Startup are the lines printed up to and including the ready line.
	Startup []string
	// Wall is the time from exec to the ready line.
	Wall time.Duration
	// Reported is the start-up time the state file records (datadir.State.ReadyMillis).
	Reported time.Duration

	kubeconfig string
	dir        *datadir.Dir
	log        *os.File
	exited     chan struct{}
}

// Start runs `rayctl up --data-dir o.DataDir o.Args...` and waits until it is ready: it has written its
// state file and printed the ready line that follows it, so Startup and Output hold everything printed
// before. It
// fails, having killed the process, when the process exits first, when o.ReadyTimeout passes or when
// ctx ends; ctx bounds only the wait, not the process's life.
func Start(ctx context.Context, o Options) (*Process, error) {
	p := &Process{
		Output:     &Buffer{},
		kubeconfig: filepath.Join(o.DataDir, "kubeconfig"),
		dir:        &datadir.Dir{Path: o.DataDir},
		log:        o.Log,
		exited:     make(chan struct{}),
	}
	p.Cmd = exec.Command(o.Binary, append([]string{"up", "--data-dir", o.DataDir}, o.Args...)...)
	if o.Log != nil {
		p.Cmd.Stdout, p.Cmd.Stderr = o.Log, o.Log
	} else {
		p.Cmd.Stdout, p.Cmd.Stderr = p.Output, p.Output
	}
	if len(o.Env) > 0 {
		p.Cmd.Env = append(os.Environ(), o.Env...)
	}
	if o.Detach {
		p.Cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	} else {
		p.Cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	p.Cmd.SysProcAttr.Credential = o.Credential
	t0 := time.Now()
	if err := p.Cmd.Start(); err != nil {
		return nil, err
	}
	go func() { p.Cmd.Wait(); close(p.exited) }()

	timeout := o.ReadyTimeout
	if timeout == 0 {
		timeout = DefaultReadyTimeout
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	// Output in memory says when it changes; a log file is read back every 20 ms.
	var changed <-chan struct{}
	var poll <-chan time.Time
	if o.Log == nil {
		changed = p.Output.changed()
	} else {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		poll = tick.C
	}
	for {
		if p.ready(t0) {
			return p, nil
		}
		select {
		case <-changed:
		case <-poll:
		case <-p.exited:
			if p.ready(t0) {
				// Ready, then gone at once: the caller sees it exit.
				return p, nil
			}
			return nil, fmt.Errorf("rayctl up exited before ready (%v):\n%s", p.Cmd.ProcessState, p.Text())
		case <-deadline.C:
			p.Kill()
			return nil, fmt.Errorf("rayctl up not ready after %s:\n%s", timeout, p.Text())
		case <-ctx.Done():
			p.Kill()
			return nil, fmt.Errorf("rayctl up not ready: %w", ctx.Err())
		}
	}
}

// ready says whether the process is ready, and if so sets Wall (from t0), Startup and Reported. The
// output is read before the state file: `rayctl up` writes its state before it prints the ready line,
// so output holding that line means the state read after it is this start's, not one a killed instance
// left behind.
func (p *Process) ready(t0 time.Time) bool {
	out := p.Text()
	st, err := p.dir.LastState()
	if err != nil {
		return false
	}
	lines, ok := linesThrough(out, st.ReadyLine())
	if !ok {
		return false
	}
	p.Wall, p.Startup, p.Reported = time.Since(t0), lines, time.Duration(st.ReadyMillis)*time.Millisecond
	return true
}

// linesThrough returns out's complete lines up to and including the first that is want (a line of its
// own, not text containing it), or ok=false when none is yet.
func linesThrough(out, want string) (lines []string, ok bool) {
	for rest := out; ; {
		line, after, complete := strings.Cut(rest, "\n")
		if !complete {
			return nil, false
		}
		lines = append(lines, line)
		if line == want {
			return lines, true
		}
		rest = after
	}
}

// Text is everything the process printed so far.
func (p *Process) Text() string {
	if p.log != nil {
		b, _ := os.ReadFile(p.log.Name())
		return string(b)
	}
	return p.Output.String()
}

// Pid is the process's id.
func (p *Process) Pid() int { return p.Cmd.Process.Pid }

// Exited is closed once the process has ended.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Kubeconfig is the path of the instance's admin kubeconfig.
func (p *Process) Kubeconfig() string { return p.kubeconfig }

// RESTConfig reads the admin kubeconfig, with the client-side rate limits qps and burst.
func (p *Process) RESTConfig(qps float32, burst int) (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", p.kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = qps, burst
	return cfg, nil
}

// Stop sends SIGTERM and waits up to timeout for the process to exit; after that it kills the process
// group and says so.
func (p *Process) Stop(timeout time.Duration) error {
	if procstop.Child(p.Cmd.Process.Pid, true, p.exited, timeout) {
		return fmt.Errorf("rayctl up did not stop within %s", timeout)
	}
	return nil
}

// Kill ends the process and its group with SIGKILL, as a crash would, and waits for it to be gone.
func (p *Process) Kill() {
	_ = syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGKILL)
	<-p.exited
}

// Buffer is a bytes.Buffer safe for one writer and concurrent readers.
type Buffer struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	notify chan struct{}
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.notify != nil {
		select {
		case b.notify <- struct{}{}:
		default:
		}
	}
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// changed returns a channel that receives after a Write (one pending signal at most).
func (b *Buffer) changed() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.notify == nil {
		b.notify = make(chan struct{}, 1)
	}
	return b.notify
}
