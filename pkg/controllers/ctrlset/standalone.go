package ctrlset

import (
	"context"

	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// RunStandalone runs what setup registers (one controller's Setup, given env made Complete) with a plain manager of
// its own, not the shared one New builds, until ctx ends: no metrics server, and 100 QPS (burst 200)
// unless cfg sets a rate. It returns an error only when the manager fails before ctx ends (what a
// runnable says while shutting down is no failure).
func RunStandalone(ctx context.Context, cfg *rest.Config, setup SetupFunc, env Env) error {
	cfg = rest.CopyConfig(cfg)
	if cfg.QPS == 0 {
		cfg.QPS, cfg.Burst = 100, 200
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Metrics: metricsserver.Options{BindAddress: "0"},
		// A test process runs one controller in several standalone managers, one after another.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return err
	}
	if err := setup(mgr, env.Complete(mgr)); err != nil {
		return err
	}
	if err := mgr.Start(ctx); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}
