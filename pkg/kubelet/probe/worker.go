package probe

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Worker runs one probe of one container periodically until its context ends.
type Worker struct {
	// Kind is the probe's kind.
	Kind Kind
	// Spec is the probe.
	Spec *corev1.Probe
	// Target is the container.
	Target Target
	// StartedAt is when the container started; initialDelaySeconds count from it.
	StartedAt time.Time
	// Prober runs the attempts.
	Prober *Prober
	// OnResult is called when the verdict changes (after the thresholds), from the worker's goroutine.
	OnResult func(Result)
	// OnFailedAttempt is called with the message of every failed attempt (for Unhealthy events).
	OnFailedAttempt func(message string)
}

// Run probes until ctx ends. A liveness or startup worker stops after reporting Failure (the container
// is about to be restarted); a startup worker also stops after Success, as startup probes run only
// until the container has started. A worker whose Prober always succeeds (simulated nodes) stops after
// reporting Success: its verdict cannot change, and 10,000 simulated pods need no 20,000 timers.
func (w *Worker) Run(ctx context.Context) {
	period := time.Duration(w.Spec.PeriodSeconds) * time.Second
	if period <= 0 {
		period = 10 * time.Second
	}
	success, failure := int(w.Spec.SuccessThreshold), int(w.Spec.FailureThreshold)
	if success <= 0 {
		success = 1
	}
	if failure <= 0 {
		failure = 3
	}
	if delay := time.Until(w.StartedAt.Add(time.Duration(w.Spec.InitialDelaySeconds) * time.Second)); delay > 0 {
		if !sleep(ctx, delay) {
			return
		}
	}
	reported := Unknown
	last, run := Unknown, 0
	for {
		ok, msg := w.Prober.Run(ctx, w.Spec, w.Target)
		if ctx.Err() != nil {
			return
		}
		result := Success
		if !ok {
			result = Failure
			if w.OnFailedAttempt != nil {
				w.OnFailedAttempt(msg)
			}
		}
		if result == last {
			run++
		} else {
			last, run = result, 1
		}
		if (result == Success && run >= success) || (result == Failure && run >= failure) {
			if result != reported {
				reported = result
				w.OnResult(result)
			}
			if (w.Kind == Liveness || w.Kind == Startup) && result == Failure {
				return
			}
			if result == Success && (w.Kind == Startup || w.Prober.AlwaysSucceed) {
				return
			}
		}
		if !sleep(ctx, period) {
			return
		}
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
