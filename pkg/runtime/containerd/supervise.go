package containerd

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// SuperviseOptions tunes Supervise. Zero values take the defaults.
type SuperviseOptions struct {
	// Backoff is the wait before the first restart after an exit (default 200 ms). It doubles after
	// each quick failure, up to MaxBackoff (default 30 s).
	Backoff, MaxBackoff time.Duration
	// Stable is how long containerd must have run for its exit not to count as a quick failure
	// (default 1 min): a daemon that ran that long starts again with the first Backoff.
	Stable time.Duration
	// MaxFailures is how many quick failures in a row (exits soon after a start, or starts that do
	// not answer) make Supervise give up (default 5).
	MaxFailures int
	// OnExit is called when containerd exits without Stop, with how it ended.
	OnExit func(err error)
	// OnRestart is called once a restarted containerd answers, with how long there was none.
	OnRestart func(down time.Duration)
	// OnRestartFailed is called when a restart attempt fails, before the next wait.
	OnRestartFailed func(err error)
}

func (o *SuperviseOptions) defaults() {
	if o.Backoff <= 0 {
		o.Backoff = 200 * time.Millisecond
	}
	if o.MaxBackoff < o.Backoff {
		o.MaxBackoff = 30 * time.Second
	}
	if o.Stable <= 0 {
		o.Stable = time.Minute
	}
	if o.MaxFailures <= 0 {
		o.MaxFailures = 5
	}
}

// Supervise watches the daemon until ctx ends or Stop is called, and starts it again, with the same
// configuration, root, state and socket, whenever it exits on its own (killed, crashed). Containers
// keep running in their shims meanwhile; the new daemon picks them up, and clients reconnect to the
// same socket (see Runtime.Reconnect). Restarts back off; after MaxFailures quick failures in a row
// Supervise gives up: the returned channel then receives an error that says so and where containerd's
// log is. The channel is closed when Supervise returns for any other reason.
func (d *Daemon) Supervise(ctx context.Context, o SuperviseOptions) <-chan error {
	o.defaults()
	failed := make(chan error, 1)
	go func() {
		defer close(failed)
		if err := d.supervise(ctx, o); err != nil {
			failed <- err
		}
	}()
	return failed
}

func (d *Daemon) supervise(ctx context.Context, o SuperviseOptions) error {
	backoff, quick := o.Backoff, 0
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-d.Done():
		}
		d.mu.Lock()
		stopping, ran, exitErr := d.stopping, time.Since(d.started), d.waitErr
		d.mu.Unlock()
		if stopping {
			return nil
		}
		down := time.Now()
		if exitErr == nil {
			exitErr = fmt.Errorf("exit status 0")
		}
		if o.OnExit != nil {
			o.OnExit(exitErr)
		}
		if ran >= o.Stable {
			backoff, quick = o.Backoff, 0
		}
		quick++
		for {
			if quick > o.MaxFailures {
				return fmt.Errorf("the private containerd failed %d times in a row, each soon after it started (last: %v); "+
					"giving up on it (its log: %s)", quick-1, summarize(exitErr), d.LogPath)
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, o.MaxBackoff)
			err := d.start(ctx)
			if err == nil {
				break
			}
			d.mu.Lock()
			stopping := d.stopping
			d.mu.Unlock()
			if stopping || ctx.Err() != nil {
				return nil
			}
			exitErr = err
			if o.OnRestartFailed != nil {
				o.OnRestartFailed(err)
			}
			quick++
		}
		if o.OnRestart != nil {
			o.OnRestart(time.Since(down))
		}
	}
}

// summarize shortens an error that carries containerd's log: its first line and, when there are more,
// its last.
func summarize(err error) string {
	lines := strings.Split(strings.TrimSpace(err.Error()), "\n")
	first := lines[0]
	if head, _, ok := strings.Cut(first, "): "); ok && len(lines) > 1 {
		first = head + ")" // the rest of the line is the start of a log excerpt
	}
	if len(first) > 200 {
		first = first[:200] + "…"
	}
	if len(lines) == 1 {
		return first
	}
	return first + " … " + strings.TrimSpace(lines[len(lines)-1])
}
