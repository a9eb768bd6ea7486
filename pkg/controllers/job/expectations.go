package job

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// expectationTimeout bounds how long a Job waits for the cache to show its own writes; past it the
// controller trusts the cache again (a watch event was lost).
const expectationTimeout = 5 * time.Minute

// expectations remember, per Job, the pods this controller created or deleted that the informer cache
// may not show yet, so that a lagging cache never makes it create (or delete) twice.
type expectations struct {
	mu   sync.Mutex
	jobs map[types.NamespacedName]*pending
}

type pending struct {
	creates map[types.UID]struct{}
	deletes map[types.UID]struct{}
	since   time.Time
}

func newExpectations() *expectations {
	return &expectations{jobs: map[types.NamespacedName]*pending{}}
}

// satisfied drops what pods (the cache's view) shows done and reports whether nothing is outstanding.
func (e *expectations) satisfied(key types.NamespacedName, pods []*corev1.Pod, now time.Time) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	p := e.jobs[key]
	if p == nil {
		return true
	}
	seen := make(map[types.UID]*corev1.Pod, len(pods))
	for _, pod := range pods {
		seen[pod.UID] = pod
	}
	for uid := range p.creates {
		if _, ok := seen[uid]; ok {
			delete(p.creates, uid)
		}
	}
	for uid := range p.deletes {
		if pod, ok := seen[uid]; !ok || pod.DeletionTimestamp != nil {
			delete(p.deletes, uid)
		}
	}
	if len(p.creates) == 0 && len(p.deletes) == 0 || now.Sub(p.since) > expectationTimeout {
		delete(e.jobs, key)
		return true
	}
	return false
}

// created records a pod this controller created.
func (e *expectations) created(key types.NamespacedName, uid types.UID, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.get(key, now).creates[uid] = struct{}{}
}

// deleted records a pod this controller deleted.
func (e *expectations) deleted(key types.NamespacedName, uid types.UID, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.get(key, now).deletes[uid] = struct{}{}
}

// get returns key's pending record, made if missing; e.mu must be held.
func (e *expectations) get(key types.NamespacedName, now time.Time) *pending {
	p := e.jobs[key]
	if p == nil {
		p = &pending{creates: map[types.UID]struct{}{}, deletes: map[types.UID]struct{}{}}
		e.jobs[key] = p
	}
	p.since = now
	return p
}

// forget drops what is known of a Job that is gone.
func (e *expectations) forget(key types.NamespacedName) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.jobs, key)
}
