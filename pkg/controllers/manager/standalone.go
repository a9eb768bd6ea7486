package manager

import (
	"context"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// RunStandalone runs what setup registers (e.g. one controller's Setup) with a plain manager of its own,
// not the shared one New builds, until ctx ends: no metrics server, and 100 QPS (burst 200) unless cfg
// sets a rate.
func RunStandalone(ctx context.Context, cfg *rest.Config, setup func(ctrl.Manager) error) error {
	cfg = rest.CopyConfig(cfg)
	if cfg.QPS == 0 {
		cfg.QPS, cfg.Burst = 100, 200
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		return err
	}
	if err := setup(mgr); err != nil {
		return err
	}
	return mgr.Start(ctx)
}
