// Package namespace empties namespaces that are being deleted, as kube-controller-manager's namespace
// controller does. Deleting a namespace only marks it Terminating while its spec.finalizers holds
// "kubernetes"; this controller deletes every namespaced object in it (built-in kinds and custom
// resources alike, found through discovery), waits until nothing is left, reports progress in the
// namespace's status conditions, then removes the finalizer through namespaces/finalize and deletes the
// namespace again so that the API server removes it.
package namespace

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/rayctl/rayctl/pkg/controllers/chainhooks"
	"github.com/rayctl/rayctl/pkg/controllers/ctrlset"
)

// Name is the controller's name, in logs and metrics.
const Name = "namespace"

// reconciler empties and finally removes one terminating namespace.
type reconciler struct {
	// client reads namespaces through the manager's cache and writes them to the API server.
	client client.Client
	// metadata lists and deletes the namespace's content, whatever its kind.
	metadata metadata.Interface
	// discovery finds the namespaced resources.
	discovery discovery.DiscoveryInterface
	// reportConditions writes the Namespace*Failure / *Remaining conditions to the namespace's status on
	// every pass. Off by default: rayctl's namespace store lets the generic store delete a namespace
	// on any update once its deletionTimestamp is set and metadata.finalizers is empty, whatever
	// spec.finalizers says, so a status write would remove a namespace that still has content.
	reportConditions bool
	// recheckAfter is how long to wait before looking again at content that is still going away
	// (pods terminating gracefully, objects held by finalizers); zero means one second.
	recheckAfter time.Duration
}

// Setup registers the controller with mgr: it watches namespaces that carry a deletionTimestamp.
func Setup(mgr ctrl.Manager, env ctrlset.Env) error {
	r, err := newReconciler(mgr.GetClient(), mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return err
	}
	terminating := chainhooks.Named("terminating", predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetDeletionTimestamp() != nil }))
	return env.Hooks.NewControllerManagedBy(mgr).
		For(&corev1.Namespace{}, terminating).
		Complete(r)
}

// Run runs the controller alone, with a manager of its own, until ctx ends.
func Run(ctx context.Context, cfg *rest.Config) error {
	return ctrlset.RunStandalone(ctx, cfg, Setup, ctrlset.Env{Name: Name})
}

func newReconciler(c client.Client, cfg *rest.Config, hc *http.Client) (*reconciler, error) {
	md, err := metadata.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, err
	}
	disc, err := discovery.NewDiscoveryClientForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, err
	}
	return &reconciler{client: c, metadata: md, discovery: disc, reportConditions: true}, nil
}

// Reconcile moves the namespace req names one step further towards its removal.
func (r *reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	ns := &corev1.Namespace{}
	if err := r.client.Get(ctx, types.NamespacedName{Name: req.Name}, ns); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if ns.DeletionTimestamp == nil {
		return reconcile.Result{}, nil
	}
	if !hasFinalizer(ns, corev1.FinalizerKubernetes) {
		if len(ns.Spec.Finalizers) == 0 {
			return reconcile.Result{}, r.deleteNamespace(ctx, ns)
		}
		// Another party's finalizer holds the namespace; its removal brings us back here.
		return reconcile.Result{}, nil
	}

	content, err := r.deleteContent(ctx, ns.Name)
	if r.reportConditions {
		if serr := r.writeConditions(ctx, ns, content.conditions()); serr != nil && !apierrors.IsNotFound(serr) {
			err = errors.Join(err, serr)
		}
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	if content.remaining() {
		after := r.recheckAfter
		if after <= 0 {
			after = time.Second
		}
		return reconcile.Result{RequeueAfter: after}, nil
	}

	// Empty: give up our finalizer, then delete again so that the API server removes the namespace.
	var kept []corev1.FinalizerName
	for _, f := range ns.Spec.Finalizers {
		if f != corev1.FinalizerKubernetes {
			kept = append(kept, f)
		}
	}
	ns.Spec.Finalizers = kept
	if err := r.client.SubResource("finalize").Update(ctx, ns); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("finalizing namespace %s: %w", ns.Name, err)
	}
	if len(kept) > 0 {
		return reconcile.Result{}, nil
	}
	return reconcile.Result{}, r.deleteNamespace(ctx, ns)
}

// deleteNamespace deletes ns once more, the step that removes it once its spec.finalizers are empty.
func (r *reconciler) deleteNamespace(ctx context.Context, ns *corev1.Namespace) error {
	uid := ns.UID
	err := r.client.Delete(ctx, ns, client.Preconditions{UID: &uid})
	if err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		// Conflict: the namespace was recreated under the same name (new UID), or a finalizer came back;
		// either way the next event decides.
		return nil
	}
	return fmt.Errorf("deleting namespace %s: %w", ns.Name, err)
}

func hasFinalizer(ns *corev1.Namespace, f corev1.FinalizerName) bool {
	for _, x := range ns.Spec.Finalizers {
		if x == f {
			return true
		}
	}
	return false
}

// writeConditions sets conds on the namespace's status, writing only when something changed.
func (r *reconciler) writeConditions(ctx context.Context, ns *corev1.Namespace, conds []corev1.NamespaceCondition) error {
	updated := ns.DeepCopy()
	now := metav1.Now()
	changed := false
	for _, c := range conds {
		i := conditionIndex(updated.Status.Conditions, c.Type)
		if i < 0 {
			c.LastTransitionTime = now
			updated.Status.Conditions = append(updated.Status.Conditions, c)
			changed = true
			continue
		}
		old := &updated.Status.Conditions[i]
		if old.Status != c.Status {
			old.LastTransitionTime = now
		}
		if old.Status != c.Status || old.Reason != c.Reason || old.Message != c.Message {
			old.Status, old.Reason, old.Message = c.Status, c.Reason, c.Message
			changed = true
		}
	}
	if updated.Status.Phase != corev1.NamespaceTerminating {
		updated.Status.Phase = corev1.NamespaceTerminating
		changed = true
	}
	if !changed {
		return nil
	}
	if err := r.client.Status().Update(ctx, updated); err != nil {
		return err
	}
	*ns = *updated
	return nil
}

func conditionIndex(conds []corev1.NamespaceCondition, t corev1.NamespaceConditionType) int {
	for i := range conds {
		if conds[i].Type == t {
			return i
		}
	}
	return -1
}
