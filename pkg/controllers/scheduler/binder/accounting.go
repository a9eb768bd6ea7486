package binder

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
)

// accounts keeps, per node, what the pods counted against it request: the non-terminal pods the cache
// shows bound there, and the pods this binder has placed there whose binding the cache does not show
// yet. It is fed by the pod informer's events, so placing a pod costs O(nodes), not O(pods).
//
// A pod's entry goes through assumed (placed by this binder) → bound (the cache shows it bound) → gone
// (it finished, or was deleted) → removed (the informer delivered its deletion). A pod that finished
// or left never counts again: phases Succeeded and Failed are final, and a deleted pod's UID does
// not come back. The gone state lets the retry watch apply a freeing event before the informer
// handler gets to it (they run on separate goroutines) without the handler's older events counting
// the pod again; the entry is dropped when the handler sees the deletion.
type accounts struct {
	mu    sync.Mutex
	pods  map[types.UID]*podEntry
	nodes map[string]*nodeUsage
}

type entryState int

const (
	assumed entryState = iota
	bound
	gone
)

// podEntry is what one pod counts against its node (nothing once gone), and what pod affinity reads of it.
type podEntry struct {
	state    entryState
	node     string
	requests corev1.ResourceList
	pod      placedPod
}

// entryFor is pod's entry, counted against node.
func entryFor(pod *corev1.Pod, state entryState, node string) *podEntry {
	e := &podEntry{state: state, node: node, requests: PodRequests(pod),
		pod: placedPod{node: node, namespace: pod.Namespace, labels: pod.Labels}}
	if a := pod.Spec.Affinity; a != nil && (a.PodAffinity != nil || a.PodAntiAffinity != nil) {
		e.pod.affinity = &corev1.Affinity{PodAffinity: a.PodAffinity, PodAntiAffinity: a.PodAntiAffinity}
	}
	return e
}

func newAccounts() *accounts {
	return &accounts{pods: map[types.UID]*podEntry{}, nodes: map[string]*nodeUsage{}}
}

// counts reports whether the entry's requests are counted against its node.
func (e *podEntry) counts() bool { return e.state != gone }

func (a *accounts) add(node string, req corev1.ResourceList, sign int) {
	u := a.nodes[node]
	if u == nil {
		u = &nodeUsage{requests: corev1.ResourceList{}}
		a.nodes[node] = u
	}
	for name, q := range req {
		cur := u.requests[name]
		if sign > 0 {
			cur.Add(q)
		} else {
			cur.Sub(q)
		}
		u.requests[name] = cur
	}
	u.pods += sign
	if u.pods == 0 {
		delete(a.nodes, node) // nothing counts there: start again from zero, exactly
	}
}

// uncount takes e's requests off its node and marks it gone.
func (a *accounts) uncount(e *podEntry) {
	if e.counts() {
		a.add(e.node, e.requests, -1)
	}
	e.state, e.requests = gone, nil
}

// observe applies the informer's current view of pod (an add or an update).
func (a *accounts) observe(pod *corev1.Pod) {
	a.mu.Lock()
	defer a.mu.Unlock()
	e := a.pods[pod.UID]
	switch {
	case e != nil && e.state == gone:
		// Finished or deleted: an older event delivered late does not count it again.
	case terminal(pod):
		if e != nil {
			a.uncount(e)
		}
	case pod.Spec.NodeName == "":
		// Pending: an assumed entry stays until the cache shows the binding (or the binding fails).
	case e == nil:
		e = entryFor(pod, bound, pod.Spec.NodeName)
		a.pods[pod.UID] = e
		a.add(e.node, e.requests, 1)
	default:
		// Assumed, or bound already (a status update, or a resize): count what the pod asks now, where it is.
		req := PodRequests(pod)
		if e.state != bound || e.node != pod.Spec.NodeName || !equalLists(e.requests, req) {
			a.add(e.node, e.requests, -1)
			*e = *entryFor(pod, bound, pod.Spec.NodeName)
			a.add(e.node, e.requests, 1)
		}
	}
}

// left marks pod as no longer counting (it finished or is gone), ahead of the informer handler.
func (a *accounts) left(uid types.UID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if e := a.pods[uid]; e != nil {
		a.uncount(e)
	}
}

// deleted drops the pod: the informer delivers nothing more for it.
func (a *accounts) deleted(uid types.UID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if e := a.pods[uid]; e != nil {
		a.uncount(e)
		delete(a.pods, uid)
	}
}

// forgetAssumed drops the pod's entry if it is still only assumed (its binding failed).
func (a *accounts) forgetAssumed(uid types.UID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if e := a.pods[uid]; e != nil && e.state == assumed {
		a.uncount(e)
		delete(a.pods, uid)
	}
}

// placeWith calls choose with each node's usage and a lister of the pods counted against nodes (all of
// them, or only those with pod affinity terms) under the accounts' lock and, when it names a node,
// assumes pod there before the lock is let go: no other placement or event comes in between. It
// returns known (and chooses nothing) when the accounts hold the pod already: placed by this binder,
// or shown bound, finished or gone by the cache.
func (a *accounts) placeWith(pod *corev1.Pod, choose func(usage func(node string) nodeUsage, others func(all bool) []placedPod) string) (node string, known bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.pods[pod.UID] != nil {
		return "", true
	}
	node = choose(func(n string) nodeUsage {
		if u := a.nodes[n]; u != nil {
			return *u
		}
		return nodeUsage{}
	}, func(all bool) []placedPod {
		var others []placedPod
		for _, e := range a.pods {
			if e.counts() && (all || e.pod.affinity != nil) {
				others = append(others, e.pod)
			}
		}
		return others
	})
	if node == "" {
		return "", false
	}
	e := entryFor(pod, assumed, node)
	a.pods[pod.UID] = e
	a.add(node, e.requests, 1)
	return node, false
}

// handler is the pod informer's event handler that feeds the accounts.
func (a *accounts) handler() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if p, ok := obj.(*corev1.Pod); ok {
				a.observe(p)
			}
		},
		UpdateFunc: func(_, obj any) {
			if p, ok := obj.(*corev1.Pod); ok {
				a.observe(p)
			}
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok {
				a.deleted(p.UID)
			}
		},
	}
}
