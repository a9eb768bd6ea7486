package gc

import (
	"slices"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// node is what the collector knows of one object, from its resource's cache.
type node struct {
	gvr        schema.GroupVersionResource
	namespace  string
	name       string
	uid        types.UID
	owners     []metav1.OwnerReference
	finalizers []string
	deleting   bool
}

func newNode(gvr schema.GroupVersionResource, m *metav1.PartialObjectMetadata) *node {
	return &node{
		gvr:        gvr,
		namespace:  m.Namespace,
		name:       m.Name,
		uid:        m.UID,
		owners:     m.OwnerReferences,
		finalizers: m.Finalizers,
		deleting:   m.DeletionTimestamp != nil,
	}
}

func (n *node) hasFinalizer(f string) bool { return slices.Contains(n.finalizers, f) }

// waitingForDependents reports an owner deleted in the foreground, whose dependents go first.
func (n *node) waitingForDependents() bool {
	return n.deleting && n.hasFinalizer(metav1.FinalizerDeleteDependents)
}

// ownerRef returns n's reference to owner, if any.
func (n *node) ownerRef(owner types.UID) (metav1.OwnerReference, bool) {
	for _, r := range n.owners {
		if r.UID == owner {
			return r, true
		}
	}
	return metav1.OwnerReference{}, false
}

// graph holds every observed object by UID, and the dependents of every owner UID, observed or not.
type graph struct {
	mu         sync.RWMutex
	nodes      map[types.UID]*node
	dependents map[types.UID]map[types.UID]struct{}
}

func newGraph() *graph {
	return &graph{nodes: map[types.UID]*node{}, dependents: map[types.UID]map[types.UID]struct{}{}}
}

// get returns the node of uid, or nil. Nodes are never modified once stored, so it may be read freely.
func (g *graph) get(uid types.UID) *node {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.nodes[uid]
}

// dependentsOf returns the observed dependents of owner.
func (g *graph) dependentsOf(owner types.UID) []*node {
	g.mu.RLock()
	defer g.mu.RUnlock()
	var out []*node
	for uid := range g.dependents[owner] {
		if n := g.nodes[uid]; n != nil {
			out = append(out, n)
		}
	}
	return out
}

// hasDependents reports whether any observed object names owner as an owner.
func (g *graph) hasDependents(owner types.UID) bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return len(g.dependents[owner]) > 0
}

// put stores n, replacing what was known of its UID, and returns the previous node (or nil).
func (g *graph) put(n *node) *node {
	g.mu.Lock()
	defer g.mu.Unlock()
	old := g.nodes[n.uid]
	g.nodes[n.uid] = n
	if old != nil {
		g.unindex(old)
	}
	for _, r := range n.owners {
		deps := g.dependents[r.UID]
		if deps == nil {
			deps = map[types.UID]struct{}{}
			g.dependents[r.UID] = deps
		}
		deps[n.uid] = struct{}{}
	}
	return old
}

// remove forgets uid and returns its last node (or nil) and the dependents that named it as an owner.
func (g *graph) remove(uid types.UID) (*node, []types.UID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	old := g.nodes[uid]
	if old == nil {
		return nil, nil
	}
	delete(g.nodes, uid)
	g.unindex(old)
	var deps []types.UID
	for d := range g.dependents[uid] {
		deps = append(deps, d)
	}
	return old, deps
}

// unindex drops n from its owners' dependent sets.
func (g *graph) unindex(n *node) {
	for _, r := range n.owners {
		deps := g.dependents[r.UID]
		delete(deps, n.uid)
		if len(deps) == 0 {
			delete(g.dependents, r.UID)
		}
	}
}
