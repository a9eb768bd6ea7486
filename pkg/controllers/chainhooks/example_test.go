package chainhooks_test

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/rayctl/rayctl/pkg/chain"
	"github.com/rayctl/rayctl/pkg/controllers/chainhooks"
)

// replicaSetReconciler stands for a controller's reconciler.
type replicaSetReconciler struct{}

func (replicaSetReconciler) Reconcile(context.Context, reconcile.Request) (reconcile.Result, error) {
	return reconcile.Result{}, nil
}

// everyReplicaSet stands for a map function that finds the ReplicaSets a Node concerns.
func everyReplicaSet(context.Context, client.Object) []reconcile.Request { return nil }

// This example sets a controller up as the package documentation shows: For its own kind with a named
// predicate, Owns what it creates, Watches another kind through a map function, with the hooks of one
// recorder inside every hop. (It needs a cluster, so it is compiled, not run.)
func ExampleHooks_NewControllerManagedBy() {
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{})
	if err != nil {
		panic(err)
	}
	recorder := chain.New(chain.DefaultSize)
	h := chainhooks.New("replicaset", recorder)
	err = h.NewControllerManagedBy(mgr).
		For(&appsv1.ReplicaSet{}, chainhooks.Named("generation changed", predicate.GenerationChangedPredicate{})).
		Owns(&corev1.Pod{}).
		Watches(&corev1.Node{}, "node changed", handler.EnqueueRequestsFromMapFunc(everyReplicaSet)).
		MaxConcurrentReconciles(1).
		Complete(replicaSetReconciler{})
	if err != nil {
		panic(err)
	}
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		panic(err)
	}
}
