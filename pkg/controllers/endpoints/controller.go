package endpoints

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/kubectl/pkg/util/podutils"
)

// ManagedBy is the endpointslice.kubernetes.io/managed-by value on the slices this controller writes. It is
// the value kube-controller-manager's EndpointSlice controller uses, so tools that look for controller-made
// slices find these.
const ManagedBy = "endpointslice-controller.k8s.io"

// UserAgent is the user agent the controller's API requests carry.
const UserAgent = "rayctl/endpoints-controller"

// Options tunes the controller.
type Options struct {
	// Workers is how many Services are synced in parallel; 2 when zero.
	Workers int
	// ResyncPeriod re-examines every Service this often even without changes; never when zero.
	ResyncPeriod time.Duration
}

// Controller maintains Endpoints and EndpointSlices for Services with selectors. Its Start method makes it a
// controller-runtime manager.Runnable, so it may run inside a manager (mgr.Add) or on its own (Run).
type Controller struct {
	client    kubernetes.Interface
	factory   informers.SharedInformerFactory
	services  corelisters.ServiceLister
	pods      corelisters.PodLister
	endpoints corelisters.EndpointsLister
	slices    discoverylisters.EndpointSliceLister
	synced    []cache.DoneChecker
	queue     workqueue.TypedRateLimitingInterface[string]
	workers   int
}

// Run builds a Controller from cfg and runs it until ctx ends.
func Run(ctx context.Context, cfg *rest.Config, opts Options) error {
	c, err := New(cfg, opts)
	if err != nil {
		return err
	}
	return c.Start(ctx)
}

// New builds a Controller talking to the API server at cfg. Nothing is watched until Start.
func New(cfg *rest.Config, opts Options) (*Controller, error) {
	cfg = rest.CopyConfig(cfg)
	if cfg.UserAgent == "" {
		cfg.UserAgent = UserAgent
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return NewForClient(client, opts), nil
}

// NewForClient builds a Controller on an existing clientset.
func NewForClient(client kubernetes.Interface, opts Options) *Controller {
	if opts.Workers <= 0 {
		opts.Workers = 2
	}
	f := informers.NewSharedInformerFactory(client, opts.ResyncPeriod)
	c := &Controller{
		client:  client,
		factory: f,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "endpoints"}),
		workers: opts.Workers,
	}
	svcInf := f.Core().V1().Services()
	podInf := f.Core().V1().Pods()
	epInf := f.Core().V1().Endpoints()
	sliceInf := f.Discovery().V1().EndpointSlices()
	c.services, c.pods, c.endpoints, c.slices = svcInf.Lister(), podInf.Lister(), epInf.Lister(), sliceInf.Lister()
	c.synced = []cache.DoneChecker{svcInf.Informer().HasSyncedChecker(), podInf.Informer().HasSyncedChecker(),
		epInf.Informer().HasSyncedChecker(), sliceInf.Informer().HasSyncedChecker()}

	_, _ = svcInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, obj any) { c.enqueue(obj) },
		DeleteFunc: c.enqueue,
	})
	_, _ = podInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { c.enqueuePodServices(obj, nil) },
		UpdateFunc: func(old, obj any) {
			o, n := old.(*corev1.Pod), obj.(*corev1.Pod)
			if podChanged(o, n) {
				c.enqueuePodServices(n, o)
			}
		},
		DeleteFunc: func(obj any) { c.enqueuePodServices(obj, nil) },
	})
	// Our own objects: a change or deletion by someone else brings the Service back for a check.
	_, _ = epInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) { c.enqueue(obj) },
		DeleteFunc: c.enqueue,
	})
	_, _ = sliceInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) { c.enqueueSliceService(obj) },
		DeleteFunc: c.enqueueSliceService,
	})
	return c
}

// Start watches Services, Pods, Endpoints and EndpointSlices and syncs until ctx ends. It returns an error
// only when the caches cannot be filled.
func (c *Controller) Start(ctx context.Context) error {
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown()
	logger := klog.FromContext(ctx).WithName("endpoints")
	c.factory.Start(ctx.Done())
	defer c.factory.Shutdown()
	if !cache.WaitFor(ctx, "", c.synced...) {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("endpoints controller: caches did not sync")
	}
	logger.Info("started", "workers", c.workers)
	for i := 0; i < c.workers; i++ {
		go wait.UntilWithContext(ctx, c.worker, time.Second)
	}
	<-ctx.Done()
	return nil
}

func (c *Controller) worker(ctx context.Context) {
	for c.processNext(ctx) {
	}
}

func (c *Controller) processNext(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	if err := c.sync(ctx, key); err != nil {
		klog.FromContext(ctx).V(2).Info("sync failed, retrying", "service", key, "err", err)
		c.queue.AddRateLimited(key)
		return true
	}
	c.queue.Forget(key)
	return true
}

func (c *Controller) enqueue(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	c.queue.Add(key)
}

func (c *Controller) enqueueSliceService(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok || s.Labels[discoveryv1.LabelManagedBy] != ManagedBy {
		return
	}
	if name := s.Labels[discoveryv1.LabelServiceName]; name != "" {
		c.queue.Add(s.Namespace + "/" + name)
	}
}

// enqueuePodServices enqueues every Service in the pod's namespace whose selector matches the pod's labels,
// now or (for old) before the change.
func (c *Controller) enqueuePodServices(obj any, old *corev1.Pod) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	svcs, err := c.services.Services(pod.Namespace).List(labels.Everything())
	if err != nil {
		return
	}
	for _, svc := range svcs {
		if len(svc.Spec.Selector) == 0 {
			continue
		}
		sel := labels.SelectorFromValidatedSet(svc.Spec.Selector)
		if sel.Matches(labels.Set(pod.Labels)) || (old != nil && sel.Matches(labels.Set(old.Labels))) {
			c.queue.Add(svc.Namespace + "/" + svc.Name)
		}
	}
}

// podChanged reports whether an update touches anything an endpoint is made of.
func podChanged(o, n *corev1.Pod) bool {
	return o.Status.PodIP != n.Status.PodIP ||
		!apiequality.Semantic.DeepEqual(o.Status.PodIPs, n.Status.PodIPs) ||
		o.Status.Phase != n.Status.Phase ||
		podutils.IsPodReady(o) != podutils.IsPodReady(n) ||
		(o.DeletionTimestamp == nil) != (n.DeletionTimestamp == nil) ||
		!apiequality.Semantic.DeepEqual(o.Labels, n.Labels) ||
		o.Spec.Hostname != n.Spec.Hostname || o.Spec.Subdomain != n.Spec.Subdomain ||
		o.Spec.NodeName != n.Spec.NodeName ||
		!apiequality.Semantic.DeepEqual(o.Spec.Containers, n.Spec.Containers)
}
