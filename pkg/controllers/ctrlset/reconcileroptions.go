package ctrlset

import (
	"time"

	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/rayctl/rayctl/pkg/controllers/chainhooks"
)

// ReconcilerOptions are the options that controllers with an Options type of their own (tests set more
// than Env carries) have in common; the RayJob and RayService controllers embed them.
type ReconcilerOptions struct {
	// Recorder records the controller's events; FromEnv fills it from Env or the manager.
	Recorder record.EventRecorder
	// RequeueAfter is how often an object in progress is looked at again; 0 means the controller's
	// default.
	RequeueAfter time.Duration
	// MaxConcurrentReconciles is the number of workers; 0 means 1, as KubeRay.
	MaxConcurrentReconciles int
	// Hooks reports the controller's trigger chain (events, maps, enqueues, reconciles, status writes)
	// to the chain recorder; nil means hooks that record nothing.
	Hooks *chainhooks.Hooks
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// WithDefaults returns o with what is unset filled in: a recorder that keeps nothing, requeue as the
// requeue period, one worker, the clock time.Now and hooks for the controller called name that record
// nothing.
func (o ReconcilerOptions) WithDefaults(name string, requeue time.Duration) ReconcilerOptions {
	if o.Recorder == nil {
		o.Recorder = &record.FakeRecorder{}
	}
	if o.RequeueAfter <= 0 {
		o.RequeueAfter = requeue
	}
	if o.MaxConcurrentReconciles <= 0 {
		o.MaxConcurrentReconciles = 1
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Hooks == nil {
		o.Hooks = chainhooks.New(name, nil)
	}
	return o
}

// FromEnv returns o with what the registry's env supplies: the event recorder (mgr's recorder for
// component where env has none), the chain hooks and, when env sets it, the reconcile concurrency.
func (o ReconcilerOptions) FromEnv(mgr ctrl.Manager, env Env, component string) ReconcilerOptions {
	o.Recorder, o.Hooks = env.Recorder, env.Hooks
	if env.ReconcileConcurrency > 0 {
		o.MaxConcurrentReconciles = env.ReconcileConcurrency
	}
	if o.Recorder == nil {
		o.Recorder = mgr.GetEventRecorderFor(component) //nolint:staticcheck // core/v1 events, which kubectl describe shows
	}
	return o
}
