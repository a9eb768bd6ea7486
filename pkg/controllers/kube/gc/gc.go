// Package gc is rayctl's garbage collector, the part of kube-controller-manager that follows
// ownerReferences across every resource:
//
//   - background: an object whose owners are all gone is deleted (an owner recreated under the same
//     name, with a new UID, counts as gone);
//   - foreground: an owner deleted with propagationPolicy=Foreground keeps its deletionTimestamp and the
//     foregroundDeletion finalizer, which the API server adds; the collector deletes its dependents and
//     removes the finalizer once no dependent with blockOwnerDeletion=true remains;
//   - orphan: an owner deleted with propagationPolicy=Orphan carries the orphan finalizer; the collector
//     strips the owner's reference from its dependents, then removes the finalizer.
//
// It watches the metadata of every listable, watchable and deletable resource that discovery reports
// (custom resources included; events excepted), rediscovering periodically so that new CRDs are
// followed, and keeps a graph from owner UIDs to dependents. Every decision is checked against a live
// read of the object before it deletes or patches anything.
package gc

import (
	"context"
	"net/http"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/rayctl/rayctl/pkg/controllers/ctrlset"
)

// Name is the collector's name, as registered with the controller manager.
const Name = "garbagecollector"

// Collector is the garbage collector. Make one with New, start it with Start.
type Collector struct {
	// Workers is how many objects are processed at once; zero means 2.
	Workers int
	// RediscoveryPeriod is how often discovery is asked for new or removed resources; zero means 30 s.
	RediscoveryPeriod time.Duration

	metadata  metadata.Interface
	discovery discovery.DiscoveryInterface
	mapper    *restmapper.DeferredDiscoveryRESTMapper
	queue     workqueue.TypedRateLimitingInterface[types.UID]
	graph     *graph
	absent    *absentOwners

	mu       sync.Mutex
	monitors map[schema.GroupVersionResource]*monitor
}

// New returns a collector that talks to the API server cfg describes.
func New(cfg *rest.Config) (*Collector, error) {
	cfg = rest.CopyConfig(cfg)
	if cfg.QPS == 0 {
		cfg.QPS, cfg.Burst = 100, 200
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	return newCollector(cfg, hc)
}

func newCollector(cfg *rest.Config, hc *http.Client) (*Collector, error) {
	md, err := metadata.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, err
	}
	disc, err := discovery.NewDiscoveryClientForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, err
	}
	return &Collector{
		metadata:  md,
		discovery: disc,
		mapper:    restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc)),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[types.UID](),
			workqueue.TypedRateLimitingQueueConfig[types.UID]{Name: "garbagecollector"}),
		graph:    newGraph(),
		absent:   newAbsentOwners(),
		monitors: map[schema.GroupVersionResource]*monitor{},
	}, nil
}

// Run runs a garbage collector against cfg's API server until ctx ends.
func Run(ctx context.Context, cfg *rest.Config) error {
	c, err := New(cfg)
	if err != nil {
		return err
	}
	return c.Start(ctx)
}

// Setup adds a garbage collector to mgr, sharing its REST config and HTTP client. It stays a loop of
// its own rather than a builder-made controller: it watches every resource discovery lists (metadata
// only, with monitors added and dropped as CRDs come and go) and keys its queue by UID across kinds,
// where a controller-runtime controller watches kinds fixed at setup and keys by namespace/name.
func Setup(mgr ctrl.Manager, _ ctrlset.Env) error {
	c, err := newCollector(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return err
	}
	return mgr.Add(manager.RunnableFunc(c.Start))
}

// Start watches every resource, waits until their caches are filled, then collects until ctx ends.
func (c *Collector) Start(ctx context.Context) error {
	defer c.queue.ShutDown()
	defer c.stopMonitors()
	logger := klog.FromContext(ctx).WithName("garbagecollector")
	ctx = klog.NewContext(ctx, logger)

	// Discovery may fail while CRDs are being installed; keep trying rather than start blind.
	if err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		if err := c.syncMonitors(ctx); err != nil {
			logger.Error(err, "discovering resources")
		}
		return c.synced(), nil
	}); err != nil {
		return nil
	}
	logger.Info("caches synced, collecting", "resources", len(c.monitors))

	workers := c.Workers
	if workers <= 0 {
		workers = 2
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for c.processNext(ctx) {
			}
		})
	}
	period := c.RediscoveryPeriod
	if period <= 0 {
		period = 30 * time.Second
	}
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		c.mapper.Reset()
		if err := c.syncMonitors(ctx); err != nil {
			logger.Error(err, "rediscovering resources")
		}
	}, period)
	c.queue.ShutDown()
	wg.Wait()
	return nil
}

// processNext handles one queued object; it returns false once the queue shuts down.
func (c *Collector) processNext(ctx context.Context) bool {
	uid, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(uid)
	if err := c.process(ctx, uid); err != nil {
		utilruntime.HandleErrorWithContext(ctx, err, "garbage collecting", "uid", uid)
		c.queue.AddRateLimited(uid)
		return true
	}
	c.queue.Forget(uid)
	return true
}

// enqueue asks for uid to be looked at.
func (c *Collector) enqueue(uid types.UID) { c.queue.Add(uid) }

// absentOwners remembers owner UIDs known not to exist, so that dependents of a deleted owner cost one
// lookup rather than one each. UIDs are never reused, so an entry never turns stale.
type absentOwners struct {
	mu   sync.Mutex
	uids map[types.UID]struct{}
}

const maxAbsentOwners = 10000

func newAbsentOwners() *absentOwners { return &absentOwners{uids: map[types.UID]struct{}{}} }

func (a *absentOwners) add(uid types.UID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.uids) >= maxAbsentOwners {
		a.uids = map[types.UID]struct{}{}
	}
	a.uids[uid] = struct{}{}
}

func (a *absentOwners) has(uid types.UID) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.uids[uid]
	return ok
}
