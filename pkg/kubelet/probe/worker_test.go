package probe

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// A readiness or liveness worker of a simulated node's container reports Success once and ends: its
// verdict cannot change, so it keeps no timer for the container's lifetime.
func TestAlwaysSucceedingWorkerEndsAfterSuccess(t *testing.T) {
	for _, kind := range []Kind{Readiness, Liveness} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		var results []Result
		w := &Worker{Kind: kind, Spec: &corev1.Probe{PeriodSeconds: 1}, Prober: &Prober{AlwaysSucceed: true},
			OnResult: func(r Result) { results = append(results, r) }}
		w.Run(ctx)
		if ctx.Err() != nil {
			t.Errorf("%s worker kept running until its context ended", kind)
		}
		if len(results) != 1 || results[0] != Success {
			t.Errorf("%s worker reported %v, want one Success", kind, results)
		}
		cancel()
	}
}
