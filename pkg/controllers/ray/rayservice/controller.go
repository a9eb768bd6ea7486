// Package rayservice is the RayService controller, KubeRay v1.6's behaviour on rayctl: for each
// ray.io/v1 RayService it creates a RayCluster from spec.rayClusterConfig (named
// <rayservice>-<5 random characters>, owned by the RayService), waits for its head Pod to be ready,
// deploys spec.serveConfigV2 to the head's dashboard (PUT /api/serve/applications/, the YAML turned
// into JSON), reads the applications' status back (GET /api/serve/applications/), and once every
// application is RUNNING points the RayService's head and serve Services (<rayservice>-head-svc,
// <rayservice>-serve-svc) at that cluster. Status carries the active and pending clusters with their
// applications, the number of serve endpoints, and the Ready and UpgradeInProgress conditions.
//
// A serveConfigV2 change is deployed to the cluster in place. A rayClusterConfig change (other than
// replica counts, or worker groups added at the end, which are applied in place) is rolled out as
// KubeRay's zero-downtime upgrade when upgradeStrategy.type is NewCluster (the default): a pending
// cluster is made and the config deployed to it; when its applications all run, the Services switch
// to it, it becomes the active one, and the old cluster is deleted after
// rayClusterDeletionDelaySeconds (60 s by default). With type None (and
// NewClusterWithIncrementalUpgrade where the Gateway API is not served), the running cluster stays as
// it is. Where it is served, NewClusterWithIncrementalUpgrade moves traffic through a Gateway in steps
// (incremental.go).
//
// The RayCluster gets rayClusterConfig as stored (read unstructured), so KubeRay v1.7's fields, which
// rayctl's Go types (v1.6.2's) lack, reach it; the spec hash covers the v1.6.2 fields only.
package rayservice

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"

	"github.com/rayctl/rayctl/pkg/controllers/chainhooks"
	"github.com/rayctl/rayctl/pkg/controllers/ctrlset"
	"github.com/rayctl/rayctl/pkg/raydashboard"
	"github.com/rayctl/rayctl/pkg/rayparams"
)

// ServeAPI is what the controller asks of a head: the dashboard's Serve API, and a node's Serve
// proxy health. *raydashboard.Client implements it.
type ServeAPI interface {
	// GetServeApplications reads the applications' status.
	GetServeApplications(ctx context.Context) (*raydashboard.ServeDetails, error)
	// DeployServeConfig PUTs a whole Serve config (JSON).
	DeployServeConfig(ctx context.Context, configJSON []byte) error
	// ProxyHealthy checks the proxy the client was made for.
	ProxyHealthy(ctx context.Context) error
}

// Options configures the controller. The zero value reaches head Pod IPs directly.
type Options struct {
	// Resolver finds the dashboard of a RayCluster; nil means raydashboard.DefaultResolver(false, "").
	Resolver raydashboard.Resolver
	// NewClient returns the client for a base URL (a dashboard's or a proxy's); nil means a raydashboard client through the
	// chain transport (chainhooks.Transport).
	NewClient func(baseURL string) ServeAPI
	// GatewayAPI says the API server serves the Gateway API (Setup asks it): upgradeStrategy.type
	// NewClusterWithIncrementalUpgrade then runs as KubeRay v1.7 runs it; without, it leaves the running
	// cluster as it is (as KubeRay without its incremental-upgrade feature gate).
	GatewayAPI bool
	// Secrets reads the token Secrets of clusters whose Ray requires one; nil means the reconciler's
	// client. Setup uses the manager's API reader (no informer on every Secret).
	Secrets client.Reader
	// ReconcilerOptions are the recorder of the RayService's events, the chain hooks, the number of
	// workers, the clock and how often a RayService is looked at again (0 means DefaultRequeue).
	ctrlset.ReconcilerOptions
}

func (o Options) withDefaults() Options {
	if o.Resolver == nil {
		o.Resolver = raydashboard.DefaultResolver(false, "")
	}
	if o.NewClient == nil {
		o.NewClient = func(u string) ServeAPI { return raydashboard.NewDialing(u, nil, chainhooks.Transport) }
	}
	o.ReconcilerOptions = o.ReconcilerOptions.WithDefaults(DefaultRequeue)
	return o
}

// reconciler reconciles RayServices.
type reconciler struct {
	client  client.Client
	opts    Options
	configs deployedConfigs

	mu sync.Mutex
	// deleteAt holds, per RayService UID, when each of its RayClusters no longer used (by UID) is to
	// be deleted.
	deleteAt map[types.UID]map[types.UID]time.Time
	// uids are the RayServices seen, so that what is kept for one is forgotten when it goes.
	uids map[types.NamespacedName]types.UID
}

// newReconciler returns a reconciler that reads and writes through c.
func newReconciler(c client.Client, opts Options) *reconciler {
	opts = opts.withDefaults()
	if opts.Secrets == nil {
		opts.Secrets = c
	}
	return &reconciler{client: c, opts: opts, deleteAt: map[types.UID]map[types.UID]time.Time{},
		uids: map[types.NamespacedName]types.UID{}}
}

// Setup registers the RayService controller with default options (ctrlset.SetupFunc).
func Setup(mgr manager.Manager, env ctrlset.Env) error { return Options{}.Setup(mgr, env) }

// Setup registers the RayService controller with these options, in the ctrlset.SetupFunc shape (tests
// register Options{Resolver: …}.Setup). The registry's Env supplies the event recorder, the chain hooks
// and the reconcile concurrency. The manager's scheme must know ray.io/v1 and core/v1.
func (o Options) Setup(mgr manager.Manager, env ctrlset.Env) error {
	if err := ctrlset.RequireKinds(mgr.GetScheme(), "rayservice", rayv1.GroupVersion, "RayService", "RayCluster"); err != nil {
		return err
	}
	o.ReconcilerOptions = o.ReconcilerOptions.FromEnv(env)
	if o.NewClient == nil && env.PodDial != nil {
		o.NewClient = func(u string) ServeAPI { return raydashboard.NewDialing(u, env.PodDial, chainhooks.Transport) }
	}
	if o.Secrets == nil {
		o.Secrets = mgr.GetAPIReader()
	}
	if _, err := mgr.GetRESTMapper().RESTMapping(schema.GroupKind{Group: gwv1.GroupName, Kind: "HTTPRoute"}, gwv1.GroupVersion.Version); err == nil {
		o.GatewayAPI = true
	} else if !meta.IsNoMatchError(err) {
		return err
	}
	return newReconciler(mgr.GetClient(), o).setupWithManager(mgr)
}

// specLabelsOrAnnotationsChanged is KubeRay's predicate on RayServices: status writes do not requeue.
var specLabelsOrAnnotationsChanged = chainhooks.Named("generation, labels or annotations changed",
	predicate.Or(predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{}))

// setupWithManager wires KubeRay's watches: For RayService (spec, label or annotation changes),
// Owns RayCluster and Service; Serve's progress is polled every RequeueAfter.
func (r *reconciler) setupWithManager(mgr manager.Manager) error {
	return r.opts.Hooks.NewControllerManagedBy(mgr).
		For(&rayv1.RayService{}, specLabelsOrAnnotationsChanged).
		Owns(&rayv1.RayCluster{}).
		Owns(&corev1.Service{}).
		MaxConcurrentReconciles(r.opts.MaxConcurrentReconciles).
		Complete(r)
}

// Reconcile moves one RayService one step towards its spec.
func (r *reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	rs := &rayv1.RayService{}
	if err := r.client.Get(ctx, req.NamespacedName, rs); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	r.remember(req.NamespacedName, rs.UID)
	if m := rs.Spec.ManagedBy; m != nil && *m != "" && *m != rayparams.ManagedByKubeRay {
		log.V(1).Info("skipping a RayService managed by another controller", "managedBy", *m)
		return reconcile.Result{}, nil
	}
	if !rs.DeletionTimestamp.IsZero() {
		// Its clusters and Services are owned by it: the garbage collector deletes them.
		return reconcile.Result{}, nil
	}
	p := &pass{r: r, log: log, rs: rs, orig: rs.DeepCopy(), now: r.opts.Now()}
	res, err := p.run(ctx)
	if apierrors.IsConflict(err) {
		log.V(1).Info("RayService changed during reconcile; retrying", "error", err.Error())
		return reconcile.Result{RequeueAfter: 100 * time.Millisecond}, nil
	}
	return res, err
}

// remember notes the UID of the RayService key names; a new UID (the RayService was recreated) drops
// what was kept for the old one.
func (r *reconciler) remember(key types.NamespacedName, uid types.UID) {
	r.mu.Lock()
	old, ok := r.uids[key]
	r.uids[key] = uid
	r.mu.Unlock()
	if ok && old != uid {
		r.drop(old)
	}
}

// forget drops what was kept for a RayService that is gone.
func (r *reconciler) forget(key types.NamespacedName) {
	r.mu.Lock()
	uid, ok := r.uids[key]
	delete(r.uids, key)
	r.mu.Unlock()
	if ok {
		r.drop(uid)
	}
}

// drop forgets the deletion times and deployed configs kept for the RayService uid.
func (r *reconciler) drop(uid types.UID) {
	r.mu.Lock()
	delete(r.deleteAt, uid)
	r.mu.Unlock()
	r.configs.keep(uid)
}
