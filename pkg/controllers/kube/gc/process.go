package gc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// process decides about one object: as an owner being deleted with the orphan or foreground policy, or
// as a dependent whose owners may be gone.
func (c *Collector) process(ctx context.Context, uid types.UID) error {
	n := c.graph.get(uid)
	if n == nil {
		return nil
	}
	switch {
	case n.deleting && n.hasFinalizer(metav1.FinalizerOrphanDependents):
		return c.orphanDependents(ctx, n)
	case n.waitingForDependents():
		return c.deleteDependentsFirst(ctx, n)
	case n.deleting || len(n.owners) == 0:
		return nil
	}
	return c.checkOwners(ctx, n)
}

// ownerState is what became of one owner of a dependent.
type ownerState int

const (
	// solid: the owner exists and is not waiting for its dependents.
	solid ownerState = iota
	// dangling: the owner does not exist (or exists with another UID: it was recreated).
	dangling
	// waiting: the owner is being deleted in the foreground and waits for its dependents to go.
	waiting
)

// checkOwners deletes a dependent none of whose owners remain, or drops its references to owners that
// are gone when another owner remains.
func (c *Collector) checkOwners(ctx context.Context, n *node) error {
	if c.ownersInGraph(n) {
		// Every owner is known and not waiting for its dependents: nothing to do, and no need to read
		// the object (a new dependent of a known owner, the usual case, costs no request).
		return nil
	}
	live, err := c.getLive(ctx, n)
	if live == nil || err != nil {
		return err
	}
	if live.DeletionTimestamp != nil || len(live.OwnerReferences) == 0 {
		return nil
	}
	var solids, gone []metav1.OwnerReference
	waitingOwners := 0
	for _, ref := range live.OwnerReferences {
		st, err := c.ownerStateOf(ctx, n.namespace, ref)
		if err != nil {
			return err
		}
		switch st {
		case solid:
			solids = append(solids, ref)
		case dangling:
			gone = append(gone, ref)
		case waiting:
			gone = append(gone, ref)
			waitingOwners++
		}
	}
	if len(solids) > 0 {
		if len(gone) == 0 {
			return nil
		}
		drop := make([]types.UID, len(gone))
		for i, r := range gone {
			drop[i] = r.UID
		}
		return c.dropOwnerRefs(ctx, n.gvr, live, drop...)
	}
	policy := metav1.DeletePropagationBackground
	if waitingOwners > 0 && c.graph.hasDependents(n.uid) {
		// An owner waits for this object's whole subtree; delete it the same way.
		policy = metav1.DeletePropagationForeground
	}
	klog.FromContext(ctx).V(2).Info("deleting object whose owners are gone", "resource", n.gvr, "namespace", n.namespace, "name", n.name, "policy", policy)
	err = c.metadata.Resource(n.gvr).Namespace(n.namespace).Delete(ctx, n.name, metav1.DeleteOptions{
		Preconditions:     &metav1.Preconditions{UID: &live.UID, ResourceVersion: &live.ResourceVersion},
		PropagationPolicy: &policy,
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if apierrors.IsConflict(err) {
		// Changed since read: look again.
		return fmt.Errorf("deleting %s %s/%s: %w", n.gvr.Resource, n.namespace, n.name, err)
	}
	return err
}

// ownersInGraph reports whether every owner n's cached copy names is in the graph and solid (not waiting
// for its dependents to go), as Kubernetes' collector leaves such a dependent alone.
func (c *Collector) ownersInGraph(n *node) bool {
	for _, ref := range n.owners {
		o := c.graph.get(ref.UID)
		if o == nil || o.waitingForDependents() {
			return false
		}
	}
	return true
}

// ownerStateOf looks up the owner ref names: in the graph first, else with a live read.
func (c *Collector) ownerStateOf(ctx context.Context, namespace string, ref metav1.OwnerReference) (ownerState, error) {
	if o := c.graph.get(ref.UID); o != nil {
		if o.waitingForDependents() {
			return waiting, nil
		}
		return solid, nil
	}
	if c.absent.has(ref.UID) {
		return dangling, nil
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		// An owner that cannot be named cannot exist.
		return dangling, nil
	}
	mapping, err := c.mapper.RESTMapping(gv.WithKind(ref.Kind).GroupKind(), gv.Version)
	if err != nil {
		if meta.IsNoMatchError(err) {
			c.mapper.Reset()
		}
		return solid, fmt.Errorf("finding the resource of owner %s %s: %w", ref.APIVersion, ref.Kind, err)
	}
	ns := ""
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		if namespace == "" {
			// A cluster-scoped dependent cannot have a namespaced owner.
			return dangling, nil
		}
		ns = namespace
	}
	owner, err := c.metadata.Resource(mapping.Resource).Namespace(ns).Get(ctx, ref.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		c.absent.add(ref.UID)
		return dangling, nil
	case err != nil:
		return solid, err
	case owner.UID != ref.UID:
		c.absent.add(ref.UID)
		return dangling, nil
	case owner.DeletionTimestamp != nil && slices.Contains(owner.Finalizers, metav1.FinalizerDeleteDependents):
		return waiting, nil
	}
	return solid, nil
}

// orphanDependents strips owner's reference from its dependents, then removes its orphan finalizer.
func (c *Collector) orphanDependents(ctx context.Context, owner *node) error {
	var errs []error
	for _, d := range c.graph.dependentsOf(owner.uid) {
		live, err := c.getLive(ctx, d)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if live == nil {
			continue
		}
		if err := c.dropOwnerRefs(ctx, d.gvr, live, owner.uid); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	return c.removeFinalizer(ctx, owner, metav1.FinalizerOrphanDependents)
}

// deleteDependentsFirst has the dependents of an owner deleted in the foreground deleted, and removes the
// owner's foregroundDeletion finalizer once no dependent blocks it any more.
func (c *Collector) deleteDependentsFirst(ctx context.Context, owner *node) error {
	blocked := false
	for _, d := range c.graph.dependentsOf(owner.uid) {
		if ref, ok := d.ownerRef(owner.uid); ok && ref.BlockOwnerDeletion != nil && *ref.BlockOwnerDeletion {
			blocked = true
		}
		if !d.deleting {
			c.enqueue(d.uid)
		}
	}
	if blocked {
		// A blocking dependent's removal (or change of owners) queues the owner again.
		return nil
	}
	return c.removeFinalizer(ctx, owner, metav1.FinalizerDeleteDependents)
}

// getLive reads n from the API server; nil (and no error) when it is gone or was replaced.
func (c *Collector) getLive(ctx context.Context, n *node) (*metav1.PartialObjectMetadata, error) {
	live, err := c.metadata.Resource(n.gvr).Namespace(n.namespace).Get(ctx, n.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if live.UID != n.uid {
		return nil, nil
	}
	return live, nil
}

// dropOwnerRefs removes the references to owners from live's ownerReferences, failing if live changed
// since it was read.
func (c *Collector) dropOwnerRefs(ctx context.Context, gvr schema.GroupVersionResource, live *metav1.PartialObjectMetadata, owners ...types.UID) error {
	kept := make([]metav1.OwnerReference, 0, len(live.OwnerReferences))
	for _, r := range live.OwnerReferences {
		if !slices.Contains(owners, r.UID) {
			kept = append(kept, r)
		}
	}
	if len(kept) == len(live.OwnerReferences) {
		return nil
	}
	var refs any = kept
	if len(kept) == 0 {
		refs = nil
	}
	return c.patchMeta(ctx, gvr, live, map[string]any{"ownerReferences": refs})
}

// removeFinalizer removes f from the live object of n.
func (c *Collector) removeFinalizer(ctx context.Context, n *node, f string) error {
	live, err := c.getLive(ctx, n)
	if live == nil || err != nil {
		return err
	}
	if !slices.Contains(live.Finalizers, f) {
		return nil
	}
	var kept any = slices.DeleteFunc(slices.Clone(live.Finalizers), func(x string) bool { return x == f })
	if len(kept.([]string)) == 0 {
		kept = nil
	}
	return c.patchMeta(ctx, n.gvr, live, map[string]any{"finalizers": kept})
}

// patchMeta merge-patches fields into live's metadata, with its UID and resourceVersion as preconditions.
func (c *Collector) patchMeta(ctx context.Context, gvr schema.GroupVersionResource, live *metav1.PartialObjectMetadata, fields map[string]any) error {
	fields["uid"] = live.UID
	fields["resourceVersion"] = live.ResourceVersion
	patch, err := json.Marshal(map[string]any{"metadata": fields})
	if err != nil {
		return err
	}
	_, err = c.metadata.Resource(gvr).Namespace(live.Namespace).Patch(ctx, live.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
