// Package binder is rayctl's small scheduler. It watches pods that name the default scheduler and no
// node, finds a node whose labels match the pod's nodeSelector (and required node affinity), whose
// taints the pod tolerates, and whose allocatable resources minus those requested by the non-terminal
// pods already there cover the pod's requests, and binds the pod there through pods/binding. When no
// node fits it sets PodScheduled=False (reason Unschedulable, message "0/1 nodes are available: 1
// Insufficient cpu.") and records FailedScheduling, then tries again when pods go away or nodes change.
package binder

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// Config configures a binder.
type Config struct {
	// RESTConfig reaches the API server (identity e.g. system:kube-scheduler).
	RESTConfig *rest.Config
	// SchedulerName is the spec.schedulerName served (default "default-scheduler").
	SchedulerName string
	// RetryPeriod is how often unschedulable pods are tried again without a triggering change
	// (default 30s).
	RetryPeriod time.Duration
	// Workers is how many pods are scheduled at once (default 1, which keeps accounting exact).
	Workers int
	// InsufficientHint, when set, ends the FailedScheduling event of a pod that does not fit for want
	// of a resource ("Insufficient cpu"), saying what the user can do about it.
	InsufficientHint string
}

// Binder binds pending pods to nodes.
type Binder struct {
	cfg      Config
	client   kubernetes.Interface
	pods     corelisters.PodLister
	nodes    corelisters.NodeLister
	queue    workqueue.TypedRateLimitingInterface[string]
	recorder record.EventRecorder

	mu sync.Mutex
	// assumed are pods bound by this binder that the informer has not yet shown bound.
	assumed map[types.UID]assumedPod
	// unschedulable are pods waiting for a change to be tried again.
	unschedulable map[string]bool
}

type assumedPod struct {
	node     string
	requests corev1.ResourceList
}

// New returns a binder; Run (or Start, for a controller-runtime manager) runs it.
func New(cfg Config) (*Binder, error) {
	if cfg.RESTConfig == nil {
		return nil, fmt.Errorf("binder: RESTConfig is required")
	}
	if cfg.SchedulerName == "" {
		cfg.SchedulerName = corev1.DefaultSchedulerName
	}
	if cfg.RetryPeriod <= 0 {
		cfg.RetryPeriod = 30 * time.Second
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 1
	}
	rc := rest.CopyConfig(cfg.RESTConfig)
	if rc.UserAgent == "" {
		rc.UserAgent = "rayctl-binder"
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	return &Binder{
		cfg:    cfg,
		client: client,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](100*time.Millisecond, 10*time.Second),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "binder"}),
		assumed:       map[types.UID]assumedPod{},
		unschedulable: map[string]bool{},
	}, nil
}

// Start runs the binder until ctx ends; it lets a controller-runtime manager run it (mgr.Add(b)).
func (b *Binder) Start(ctx context.Context) error { return b.Run(ctx) }

// Run schedules pods until ctx ends.
func (b *Binder) Run(ctx context.Context) error {
	defer b.queue.ShutDown()
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: b.client.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	b.recorder = broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: b.cfg.SchedulerName})

	factory := informers.NewSharedInformerFactory(b.client, 0)
	podInformer := factory.Core().V1().Pods().Informer()
	nodeInformer := factory.Core().V1().Nodes().Informer()
	b.pods = factory.Core().V1().Pods().Lister()
	b.nodes = factory.Core().V1().Nodes().Lister()
	if _, err := podInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { b.podChanged(nil, obj) },
		UpdateFunc: b.podChanged,
		DeleteFunc: b.podDeleted,
	}); err != nil {
		return err
	}
	if _, err := nodeInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { b.retryUnschedulable() },
		UpdateFunc: func(old, obj any) { b.nodeUpdated(old, obj) },
	}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitFor(ctx, "", podInformer.HasSyncedChecker(), nodeInformer.HasSyncedChecker()) {
		return ctx.Err()
	}
	var wg sync.WaitGroup
	for range b.cfg.Workers {
		wg.Go(func() {
			for b.processNext(ctx) {
			}
		})
	}
	ticker := time.NewTicker(b.cfg.RetryPeriod)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			b.queue.ShutDown()
			wg.Wait()
			return nil
		case <-ticker.C:
			b.retryUnschedulable()
		}
	}
}

func (b *Binder) pending(pod *corev1.Pod) bool {
	return pod.Spec.NodeName == "" && pod.Spec.SchedulerName == b.cfg.SchedulerName && pod.DeletionTimestamp == nil &&
		pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed
}

func (b *Binder) podChanged(old, obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	if b.pending(pod) {
		key, _ := cache.MetaNamespaceKeyFunc(pod)
		b.queue.Add(key)
		return
	}
	if pod.Spec.NodeName != "" {
		b.mu.Lock()
		delete(b.assumed, pod.UID)
		b.mu.Unlock()
	}
	// A pod that finished frees its node's resources.
	if oldPod, ok := old.(*corev1.Pod); ok && !terminal(oldPod) && terminal(pod) {
		b.retryUnschedulable()
	}
}

func terminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

func (b *Binder) podDeleted(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	b.mu.Lock()
	delete(b.assumed, pod.UID)
	key, _ := cache.MetaNamespaceKeyFunc(pod)
	delete(b.unschedulable, key)
	b.mu.Unlock()
	if pod.Spec.NodeName != "" {
		b.retryUnschedulable()
	}
}

func (b *Binder) nodeUpdated(old, obj any) {
	o, n := old.(*corev1.Node), obj.(*corev1.Node)
	// Heartbeats change only condition times; retry only on changes that can matter.
	if o.Spec.Unschedulable != n.Spec.Unschedulable || nodeReady(o) != nodeReady(n) ||
		!equalLists(o.Status.Allocatable, n.Status.Allocatable) || !equalMaps(o.Labels, n.Labels) || len(o.Spec.Taints) != len(n.Spec.Taints) {
		b.retryUnschedulable()
	}
}

func equalLists(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || v.Cmp(w) != 0 {
			return false
		}
	}
	return true
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || v != w {
			return false
		}
	}
	return true
}

// retryUnschedulable queues every pod waiting for a change.
func (b *Binder) retryUnschedulable() {
	b.mu.Lock()
	keys := make([]string, 0, len(b.unschedulable))
	for k := range b.unschedulable {
		keys = append(keys, k)
	}
	b.unschedulable = map[string]bool{}
	b.mu.Unlock()
	for _, k := range keys {
		b.queue.Add(k)
	}
}

func (b *Binder) processNext(ctx context.Context) bool {
	key, quit := b.queue.Get()
	if quit {
		return false
	}
	defer b.queue.Done(key)
	if err := b.schedule(ctx, key); err != nil {
		if ctx.Err() == nil {
			utilruntime.HandleErrorWithContext(ctx, err, "scheduling pod", "pod", key)
		}
		b.queue.AddRateLimited(key)
		return true
	}
	b.queue.Forget(key)
	return true
}

// schedule places one pod.
func (b *Binder) schedule(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	pod, err := b.pods.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !b.pending(pod) {
		return nil
	}
	b.mu.Lock()
	if _, ok := b.assumed[pod.UID]; ok {
		b.mu.Unlock()
		return nil
	}
	b.mu.Unlock()
	nodes, err := b.nodes.List(everything)
	if err != nil {
		return err
	}
	usage, err := b.usage()
	if err != nil {
		return err
	}
	reasons := map[string]int{}
	var best *corev1.Node
	var bestFree int64
	for _, n := range nodes {
		why := fits(pod, n, usage[n.Name])
		if len(why) > 0 {
			for _, r := range why {
				reasons[r]++
			}
			continue
		}
		// Prefer the node with the most cpu left.
		cpu := n.Status.Allocatable[corev1.ResourceCPU]
		usedCPU := usage[n.Name].requests[corev1.ResourceCPU]
		free := cpu.MilliValue() - usedCPU.MilliValue()
		if best == nil || free > bestFree {
			best, bestFree = n, free
		}
	}
	if best == nil {
		return b.markUnschedulable(ctx, key, pod, unschedulableMessage(len(nodes), reasons))
	}
	return b.bind(ctx, pod, best.Name)
}

var everything = labels.Everything()

// usage sums the requests of the non-terminal pods bound to each node, and of the pods this binder
// has just bound.
func (b *Binder) usage() (map[string]nodeUsage, error) {
	pods, err := b.pods.List(everything)
	if err != nil {
		return nil, err
	}
	out := map[string]nodeUsage{}
	add := func(node string, req corev1.ResourceList) {
		u := out[node]
		if u.requests == nil {
			u.requests = corev1.ResourceList{}
		}
		addTo(u.requests, req)
		u.pods++
		out[node] = u
	}
	seen := map[types.UID]bool{}
	for _, p := range pods {
		if p.Spec.NodeName == "" || terminal(p) {
			continue
		}
		seen[p.UID] = true
		add(p.Spec.NodeName, PodRequests(p))
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for uid, a := range b.assumed {
		if !seen[uid] {
			add(a.node, a.requests)
		}
	}
	return out, nil
}

func (b *Binder) bind(ctx context.Context, pod *corev1.Pod, node string) error {
	binding := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: node},
	}
	b.mu.Lock()
	b.assumed[pod.UID] = assumedPod{node: node, requests: PodRequests(pod)}
	b.mu.Unlock()
	if err := b.client.CoreV1().Pods(pod.Namespace).Bind(ctx, binding, metav1.CreateOptions{}); err != nil {
		b.mu.Lock()
		delete(b.assumed, pod.UID)
		b.mu.Unlock()
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			// Gone, bound by someone else, or being deleted: nothing left to do.
			return nil
		}
		return fmt.Errorf("binding %s/%s to %s: %w", pod.Namespace, pod.Name, node, err)
	}
	b.recorder.Eventf(pod, corev1.EventTypeNormal, "Scheduled", "Successfully assigned %s/%s to %s", pod.Namespace, pod.Name, node)
	return nil
}

// markUnschedulable records why the pod waits, writing PodScheduled only when it changes.
func (b *Binder) markUnschedulable(ctx context.Context, key string, pod *corev1.Pod, message string) error {
	b.mu.Lock()
	b.unschedulable[key] = true
	b.mu.Unlock()
	event := message
	if b.cfg.InsufficientHint != "" && strings.Contains(message, " Insufficient ") {
		event += " " + b.cfg.InsufficientHint
	}
	b.recorder.Event(pod, corev1.EventTypeWarning, "FailedScheduling", event)
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable && c.Message == message {
			return nil
		}
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": pod.UID},
		"status": map[string]any{"conditions": []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
			Message: message, LastTransitionTime: metav1.Now(),
		}}},
	})
	if err != nil {
		return err
	}
	_, err = b.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	klog.FromContext(ctx).V(2).Info("pod unschedulable", "pod", key, "message", message)
	return nil
}
