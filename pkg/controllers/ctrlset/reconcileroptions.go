package ctrlset

import (
	"time"

	"k8s.io/client-go/tools/record"

	"github.com/rayctl/rayctl/pkg/controllers/chainhooks"
)

// ReconcilerOptions are the options that controllers with an Options type of their own (tests set more
// than Env carries) have in common; the RayJob and RayService controllers embed them.
type ReconcilerOptions struct {
	// Recorder records the controller's events; FromEnv sets it from Env. A test that builds a reconciler
	// without Setup passes one.
	Recorder record.EventRecorder
	// RequeueAfter is how often an object in progress is looked at again; 0 means the controller's
	// default.
	RequeueAfter time.Duration
	// MaxConcurrentReconciles is the number of workers; 0 means 1, as KubeRay.
	MaxConcurrentReconciles int
	// Hooks reports the controller's trigger chain (events, maps, enqueues, reconciles, status writes)
	// to the chain recorder; FromEnv sets it from Env. A test that builds a reconciler without Setup
	// passes chainhooks.New(name, nil).
	Hooks *chainhooks.Hooks
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// WithDefaults returns o with its timings filled in where unset: requeue as the requeue period, one
// worker and the clock time.Now.
func (o ReconcilerOptions) WithDefaults(requeue time.Duration) ReconcilerOptions {
	if o.RequeueAfter <= 0 {
		o.RequeueAfter = requeue
	}
	if o.MaxConcurrentReconciles <= 0 {
		o.MaxConcurrentReconciles = 1
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// FromEnv returns o with what the registry's env supplies: the event recorder, the chain hooks and,
// when env sets it, the reconcile concurrency.
func (o ReconcilerOptions) FromEnv(env Env) ReconcilerOptions {
	o.Recorder, o.Hooks = env.Recorder, env.Hooks
	if env.ReconcileConcurrency > 0 {
		o.MaxConcurrentReconciles = env.ReconcileConcurrency
	}
	return o
}
