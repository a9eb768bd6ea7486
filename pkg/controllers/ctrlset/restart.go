package ctrlset

import (
	"context"
	"time"

	"github.com/go-logr/logr"
)

// Restarting is a manager that comes back: controller-runtime starts a manager only once, and a
// manager stops on its own when it loses its leader Lease, which happens when the API server cannot
// write for a while (etcd out of space, say). Its controllers must come back once writes work again.
type Restarting struct {
	// Name names the manager in the log.
	Name string
	// First is the manager to start first; Build makes each next one.
	First *Manager
	Build func() (*Manager, error)
	// Logger says when the manager stopped and when building it anew failed.
	Logger logr.Logger
}

// Run runs the manager until ctx ends. A manager that stops on its own is built anew and started
// again after a pause (1 s, doubling to 30 s; back to 1 s after a run of more than five minutes).
func (r *Restarting) Run(ctx context.Context) {
	m, pause := r.First, time.Second
	for {
		started := time.Now()
		err := m.Start(ctx)
		if ctx.Err() != nil {
			return
		}
		if time.Since(started) > 5*time.Minute {
			pause = time.Second
		}
		r.Logger.Error(err, "controller manager stopped; starting it again", "manager", r.Name, "after", pause)
		for m = nil; m == nil; {
			select {
			case <-ctx.Done():
				return
			case <-time.After(pause):
			}
			pause = min(2*pause, 30*time.Second)
			if m, err = r.Build(); err != nil {
				r.Logger.Error(err, "rebuilding a controller manager", "manager", r.Name)
			}
		}
	}
}
