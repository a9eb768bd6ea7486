package framework

import (
	"context"
	"testing"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/rayctl/rayctl/pkg/controllers/ctrlset"
)

// RunControllers is the whole of a TestMain for a controller package's integration tests: it starts a
// control plane without a kubelet (see RunMain), keeps it in *in, and runs one controller-runtime manager
// with the controllers setups add (by name, each given a complete Env of that name) while the tests run;
// the tests play the kubelet by writing pod status.
func RunControllers(m *testing.M, in **Instance, setups map[string]ctrlset.SetupFunc) {
	ctrl.SetLogger(logr.Discard())
	RunMain(m, "manager", func(i *Instance) (func(context.Context) error, error) {
		*in = i
		skip := true
		mgr, err := ctrl.NewManager(i.Config, ctrl.Options{
			Metrics:    metricsserver.Options{BindAddress: "0"},
			Controller: ctrlconfig.Controller{SkipNameValidation: &skip},
		})
		if err != nil {
			return nil, err
		}
		for name, setup := range setups {
			if err := setup(mgr, ctrlset.Env{Name: name}.Complete(mgr)); err != nil {
				return nil, err
			}
		}
		return mgr.Start, nil
	})
}
