// Package status writes pods' statuses to the API server for the kubelet: a strategic merge PATCH of
// pods/status computed between what the API server holds and what the kubelet has observed, sent only
// when they differ. Every successful write is reported to an optional hook with the resourceVersion the
// API server gave it, so a recorder can link later hops of the trigger chain to it.
package status

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes"
)

// WriteHook observes a successful status write: the pod as the API server returned it and its new
// resourceVersion.
type WriteHook func(pod *corev1.Pod, resourceVersion string)

// MaxWritesInFlight bounds the status writes one manager has open at a time. Every pod worker writes
// its own pod's status; with a thousand pods starting at once, unbounded writes would queue by the
// hundred inside the API server, where every other client's request waits behind them (the real
// kubelet's status manager writes from a single goroutine). A few at a time keep the server as busy
// and its latency low: a worker whose write must wait holds nothing but its own pod.
const MaxWritesInFlight = 32

// Manager writes pod statuses. It is safe for concurrent use by many pod workers.
type Manager struct {
	client  kubernetes.Interface
	onWrite WriteHook
	slots   chan struct{}

	mu   sync.Mutex
	last map[types.UID]seen

	writes atomic.Int64
}

// NewManager returns a manager writing through client; onWrite may be nil.
func NewManager(client kubernetes.Interface, onWrite WriteHook) *Manager {
	return &Manager{client: client, onWrite: onWrite, last: map[types.UID]seen{}, slots: make(chan struct{}, MaxWritesInFlight)}
}

// seen is a status the API server held at a resourceVersion.
type seen struct {
	status          corev1.PodStatus
	resourceVersion uint64
}

// Normalize returns status as it reads back from the API server (times at one-second precision,
// empty lists dropped), so that statuses compare equal exactly when their JSON does.
func Normalize(status corev1.PodStatus) corev1.PodStatus {
	b, err := json.Marshal(status)
	if err != nil {
		return status
	}
	var out corev1.PodStatus
	if err := json.Unmarshal(b, &out); err != nil {
		return status
	}
	return out
}

// Base returns the status the next patch of pod is computed against: the one last written (or read
// back) by this manager, else pod's own.
func (m *Manager) Base(pod *corev1.Pod) corev1.PodStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s, ok := m.last[pod.UID]; ok {
		return s.status
	}
	return Normalize(pod.Status)
}

// NeedsWrite reports whether status differs from what the API server holds for pod as far as the
// manager knows.
func (m *Manager) NeedsWrite(pod *corev1.Pod, status corev1.PodStatus) bool {
	return !apiequality.Semantic.DeepEqual(m.Base(pod), Normalize(status))
}

// SetPodStatus writes status for pod if it changed and reports whether it wrote. A write that fails
// leaves the manager's view unchanged, so the next call tries again.
func (m *Manager) SetPodStatus(ctx context.Context, pod *corev1.Pod, status corev1.PodStatus) (bool, error) {
	select {
	case m.slots <- struct{}{}:
		defer func() { <-m.slots }()
	case <-ctx.Done():
		return false, ctx.Err()
	}
	base := m.Base(pod)
	next := Normalize(status)
	if apiequality.Semantic.DeepEqual(base, next) {
		return false, nil
	}
	patch, err := Patch(pod.UID, base, next)
	if err != nil {
		return false, err
	}
	updated, err := m.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return false, fmt.Errorf("patching status of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	m.writes.Add(1)
	m.mu.Lock()
	m.last[pod.UID] = seen{status: Normalize(updated.Status), resourceVersion: parseRV(updated.ResourceVersion)}
	m.mu.Unlock()
	if m.onWrite != nil {
		m.onWrite(updated, updated.ResourceVersion)
	}
	return true, nil
}

// Observe records the status the API server holds for pod when it is newer than the manager's view
// (another writer changed it after the manager's last write); call it with pods from the kubelet's
// informer. Older copies, delivered after the manager's own write, are ignored.
func (m *Manager) Observe(pod *corev1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.last[pod.UID]
	if !ok {
		return
	}
	if rv := parseRV(pod.ResourceVersion); rv > s.resourceVersion {
		m.last[pod.UID] = seen{status: Normalize(pod.Status), resourceVersion: rv}
	}
}

// parseRV reads an etcd-backed resourceVersion; anything else counts as 0.
func parseRV(rv string) uint64 {
	n, _ := strconv.ParseUint(rv, 10, 64)
	return n
}

// Forget drops what the manager knows of a pod (it was deleted).
func (m *Manager) Forget(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.last, uid)
}

// Writes returns how many status writes succeeded.
func (m *Manager) Writes() int64 { return m.writes.Load() }

// Patch returns a strategic merge patch turning old into new, guarded by the pod's UID (the API
// server rejects it if the pod was replaced by another of the same name).
func Patch(uid types.UID, old, new corev1.PodStatus) ([]byte, error) {
	oldJSON, err := json.Marshal(corev1.Pod{Status: old})
	if err != nil {
		return nil, err
	}
	newJSON, err := json.Marshal(corev1.Pod{Status: new})
	if err != nil {
		return nil, err
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(oldJSON, newJSON, corev1.Pod{})
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(patch, &m); err != nil {
		return nil, err
	}
	m["metadata"] = map[string]any{"uid": string(uid)}
	return json.Marshal(m)
}
