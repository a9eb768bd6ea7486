// Package workload holds what the apps/v1 controllers (ReplicaSet, Deployment, StatefulSet, DaemonSet)
// share, as kube-controller-manager's controller utilities do: the expectations that keep a lagging
// cache from making a controller create or delete twice, pods from a template, adoption and release of
// objects by selector and controller ownerReference, and the readiness and availability of pods.
package workload

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// expectationTimeout bounds how long a controller waits for its cache to show its own writes; past it
// the cache is trusted again (a watch event was lost).
const expectationTimeout = 5 * time.Minute

// Expectations remember, per owner, the objects a controller created or deleted that the informer cache
// may not show yet.
type Expectations struct {
	mu     sync.Mutex
	owners map[types.NamespacedName]*pending
}

type pending struct {
	creates map[string]struct{}
	deletes map[string]struct{}
	since   time.Time
}

// NewExpectations returns empty expectations.
func NewExpectations() *Expectations {
	return &Expectations{owners: map[types.NamespacedName]*pending{}}
}

// Satisfied drops what objs (the cache's view, keyed by name) shows done and reports whether nothing is
// outstanding for owner.
func (e *Expectations) Satisfied(owner types.NamespacedName, objs map[string]client.Object) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	p := e.owners[owner]
	if p == nil {
		return true
	}
	for name := range p.creates {
		if _, ok := objs[name]; ok {
			delete(p.creates, name)
		}
	}
	for uid := range p.deletes {
		found := false
		for _, o := range objs {
			if string(o.GetUID()) == uid && o.GetDeletionTimestamp() == nil {
				found = true
			}
		}
		if !found {
			delete(p.deletes, uid)
		}
	}
	if len(p.creates) == 0 && len(p.deletes) == 0 || time.Since(p.since) > expectationTimeout {
		delete(e.owners, owner)
		return true
	}
	return false
}

// Created records an object owner's controller created, by name.
func (e *Expectations) Created(owner types.NamespacedName, name string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.get(owner).creates[name] = struct{}{}
}

// Deleted records an object owner's controller deleted, by UID.
func (e *Expectations) Deleted(owner types.NamespacedName, uid types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.get(owner).deletes[string(uid)] = struct{}{}
}

// Forget drops what is known of an owner that is gone.
func (e *Expectations) Forget(owner types.NamespacedName) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.owners, owner)
}

func (e *Expectations) get(owner types.NamespacedName) *pending {
	p := e.owners[owner]
	if p == nil {
		p = &pending{creates: map[string]struct{}{}, deletes: map[string]struct{}{}}
		e.owners[owner] = p
	}
	p.since = time.Now()
	return p
}

// ByName indexes objects by name, for Expectations.Satisfied.
func ByName[T client.Object](objs []T) map[string]client.Object {
	out := make(map[string]client.Object, len(objs))
	for _, o := range objs {
		out[o.GetName()] = o
	}
	return out
}

// NewPod makes a pod from a template, controlled by owner (of kind gvk's kind); name "" with
// generateName set lets the API server name it.
func NewPod(t *corev1.PodTemplateSpec, owner metav1.Object, ownerKind schema.GroupVersionKind, name, generateName string) *corev1.Pod {
	t = t.DeepCopy()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:         name,
			GenerateName: generateName,
			Namespace:    owner.GetNamespace(),
			Labels:       maps.Clone(t.Labels),
			Annotations:  maps.Clone(t.Annotations),
			Finalizers:   t.Finalizers,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(owner,
				ownerKind)},
		},
		Spec: t.Spec,
	}
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	return pod
}

// Claim sorts the objects of a namespace for an owner with selector: those it controls and still
// selects, orphans it selects (adopted: a controller ownerReference is patched in, unless the owner is
// being deleted), and those it controls but no longer selects (released: the ownerReference is patched
// away). It returns the objects the owner controls afterwards.
func Claim[T client.Object](ctx context.Context, c client.Client, owner client.Object, ownerKind schema.GroupVersionKind, selector labels.Selector, objs []T) ([]T, error) {
	var out []T
	for _, o := range objs {
		ref := metav1.GetControllerOf(o)
		matches := selector.Matches(labels.Set(o.GetLabels()))
		switch {
		case ref != nil && ref.UID == owner.GetUID():
			if matches || o.GetDeletionTimestamp() != nil {
				out = append(out, o)
				continue
			}
			patch := fmt.Sprintf(`{"metadata":{"ownerReferences":[{"$patch":"delete","uid":%q}],"uid":%q}}`, owner.GetUID(), o.GetUID())
			if err := c.Patch(ctx, o, client.RawPatch(types.StrategicMergePatchType, []byte(patch))); client.IgnoreNotFound(err) != nil {
				return nil, err
			}
		case ref == nil && matches && o.GetDeletionTimestamp() == nil && owner.GetDeletionTimestamp() == nil:
			refs, _ := json.Marshal(metav1.NewControllerRef(owner, ownerKind))
			patch := fmt.Sprintf(`{"metadata":{"ownerReferences":[%s],"uid":%q}}`, refs, o.GetUID())
			if err := c.Patch(ctx, o, client.RawPatch(types.StrategicMergePatchType, []byte(patch))); err != nil {
				if client.IgnoreNotFound(err) != nil {
					return nil, err
				}
				continue
			}
			out = append(out, o)
		}
	}
	return out, nil
}

// IsActive reports a pod that runs or will run: not finished and not being deleted.
func IsActive(p *corev1.Pod) bool {
	return p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

// readySince is when p's Ready condition last turned True; nil when it is not True.
func readySince(p *corev1.Pod) *metav1.Time {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			t := c.LastTransitionTime
			return &t
		}
	}
	return nil
}

// Availability reports whether a pod has been ready for minReadySeconds at now, and if it is ready but
// not yet available, how long until it is.
func Availability(p *corev1.Pod, minReadySeconds int32, now time.Time) (available bool, wait time.Duration) {
	since := readySince(p)
	if since == nil {
		return false, 0
	}
	if minReadySeconds == 0 {
		return true, 0
	}
	at := since.Add(time.Duration(minReadySeconds) * time.Second)
	if !now.Before(at) {
		return true, 0
	}
	return false, at.Sub(now)
}

// TemplateHash is a short, stable, label-safe hash of a pod template and a collision count, as the
// Deployment controller puts in pod-template-hash and revisions are named by.
func TemplateHash(t *corev1.PodTemplateSpec, collisionCount *int32) string {
	h := fnv.New32a()
	data, _ := json.Marshal(t)
	h.Write(data)
	if collisionCount != nil {
		fmt.Fprintf(h, "/%d", *collisionCount)
	}
	return rand.SafeEncodeString(fmt.Sprint(h.Sum32()))
}

// MinRequeue returns the shorter of two waits, ignoring zeros.
func MinRequeue(a, b time.Duration) time.Duration {
	switch {
	case a == 0:
		return b
	case b == 0:
		return a
	}
	return min(a, b)
}

// ClaimPods lists the pods of owner's namespace that keep accepts (nil: all) and claims them for owner
// (see Claim).
func ClaimPods(ctx context.Context, c client.Client, owner client.Object, ownerKind schema.GroupVersionKind, selector labels.Selector, keep func(*corev1.Pod) bool) ([]*corev1.Pod, error) {
	list := &corev1.PodList{}
	if err := c.List(ctx, list, client.InNamespace(owner.GetNamespace())); err != nil {
		return nil, err
	}
	var pods []*corev1.Pod
	for i := range list.Items {
		if keep == nil || keep(&list.Items[i]) {
			pods = append(pods, &list.Items[i])
		}
	}
	return Claim(ctx, c, owner, ownerKind, selector, pods)
}

// Selector reads a workload's selector; false for one that selects nothing or everything (validation
// keeps those out).
func Selector(s *metav1.LabelSelector) (labels.Selector, bool) {
	sel, err := metav1.LabelSelectorAsSelector(s)
	return sel, err == nil && !sel.Empty()
}
