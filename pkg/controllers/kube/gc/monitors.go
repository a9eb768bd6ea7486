package gc

import (
	"context"
	"errors"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// ignored resources are never collected, as on a real cluster: events come and go on their own.
var ignored = map[schema.GroupResource]bool{
	{Group: "", Resource: "events"}:              true,
	{Group: "events.k8s.io", Resource: "events"}: true,
}

// monitor is the metadata informer of one resource.
type monitor struct {
	informer cache.SharedIndexInformer
	// stop ends the informer.
	stop context.CancelFunc
}

// collectableResources returns the preferred version of every resource the collector can follow.
func collectableResources(d discovery.DiscoveryInterface) (map[schema.GroupVersionResource]bool, error) {
	lists, err := d.ServerPreferredResources()
	out := map[schema.GroupVersionResource]bool{}
	for _, list := range lists {
		gv, perr := schema.ParseGroupVersion(list.GroupVersion)
		if perr != nil {
			continue
		}
		for _, r := range list.APIResources {
			if strings.Contains(r.Name, "/") || ignored[gv.WithResource(r.Name).GroupResource()] {
				continue
			}
			if sets.New(r.Verbs...).HasAll("list", "watch", "delete") {
				out[gv.WithResource(r.Name)] = true
			}
		}
	}
	return out, err
}

// syncMonitors starts an informer for every new resource and stops those of resources that went away.
// A partial discovery failure keeps the monitors of the failed groups as they are.
func (c *Collector) syncMonitors(ctx context.Context) error {
	resources, err := collectableResources(c.discovery)
	var partial *discovery.ErrGroupDiscoveryFailed
	if err != nil && !errors.As(err, &partial) {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for gvr := range resources {
		if _, ok := c.monitors[gvr]; !ok {
			c.monitors[gvr] = c.startMonitor(ctx, gvr)
		}
	}
	for gvr, m := range c.monitors {
		if resources[gvr] {
			continue
		}
		if partial != nil {
			if _, failed := partial.Groups[gvr.GroupVersion()]; failed {
				continue
			}
		}
		klog.FromContext(ctx).Info("resource went away, no longer watched", "resource", gvr)
		m.stop()
		delete(c.monitors, gvr)
		for _, obj := range m.informer.GetStore().List() {
			c.onDelete(obj)
		}
	}
	return err
}

// synced reports whether every monitor has filled its cache.
func (c *Collector) synced() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.monitors) == 0 {
		return false
	}
	for _, m := range c.monitors {
		if !m.informer.HasSynced() {
			return false
		}
	}
	return true
}

func (c *Collector) stopMonitors() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for gvr, m := range c.monitors {
		m.stop()
		delete(c.monitors, gvr)
	}
}

func (c *Collector) startMonitor(ctx context.Context, gvr schema.GroupVersionResource) *monitor {
	inf := metadatainformer.NewFilteredMetadataInformer(c.metadata, gvr, metav1.NamespaceAll, 0, cache.Indexers{}, nil).Informer()
	// The collector needs names, owners, finalizers and deletion state; drop the bulky rest.
	_ = inf.SetTransform(func(obj any) (any, error) {
		if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
			m.ManagedFields = nil
			m.Annotations = nil
			m.Labels = nil
		}
		return obj, nil
	})
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.onUpsert(gvr, obj) },
		UpdateFunc: func(_, obj any) { c.onUpsert(gvr, obj) },
		DeleteFunc: c.onDelete,
	})
	runCtx, stop := context.WithCancel(ctx)
	m := &monitor{informer: inf, stop: stop}
	go inf.RunWithContext(runCtx)
	return m
}

// onUpsert records an added or changed object and queues whatever its change may unblock.
func (c *Collector) onUpsert(gvr schema.GroupVersionResource, obj any) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return
	}
	n := newNode(gvr, m)
	old := c.graph.put(n)

	// A dependent whose owners are new or changed: check that they exist.
	if len(n.owners) > 0 && !n.deleting && (old == nil || !slices.Equal(ownerUIDs(old), ownerUIDs(n)) || old.deleting) {
		c.enqueue(n.uid)
	}
	// An owner newly waiting on its finalizers (foreground or orphan) or whose finalizers changed.
	if n.deleting && (n.hasFinalizer(metav1.FinalizerDeleteDependents) || n.hasFinalizer(metav1.FinalizerOrphanDependents)) &&
		(old == nil || !old.deleting || !slices.Equal(old.finalizers, n.finalizers)) {
		c.enqueue(n.uid)
	}
	// Owners dropped from n's references may have been waiting for n to go.
	if old != nil {
		for _, r := range old.owners {
			if _, still := n.ownerRef(r.UID); !still {
				c.enqueueIfDeleting(r.UID)
			}
		}
	}
}

// onDelete forgets a deleted object; its dependents lost an owner and its owners may have been waiting.
func (c *Collector) onDelete(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return
	}
	c.absent.add(m.UID)
	old, deps := c.graph.remove(m.UID)
	for _, d := range deps {
		c.enqueue(d)
	}
	if old != nil {
		for _, r := range old.owners {
			c.enqueueIfDeleting(r.UID)
		}
	}
}

func (c *Collector) enqueueIfDeleting(uid types.UID) {
	if o := c.graph.get(uid); o != nil && o.deleting {
		c.enqueue(uid)
	}
}

func ownerUIDs(n *node) []types.UID {
	out := make([]types.UID, len(n.owners))
	for i, r := range n.owners {
		out[i] = r.UID
	}
	return out
}
