package binder

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
)

func testPod(uid, node, cpu string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: uid, Namespace: "ns", UID: types.UID(uid)},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)},
		}}}},
	}
}

func finished(p *corev1.Pod, phase corev1.PodPhase) *corev1.Pod {
	p = p.DeepCopy()
	p.Status.Phase = phase
	return p
}

// placeOn assumes pod on node, as the binder's place does when node fits.
func placeOn(a *accounts, pod *corev1.Pod, node string) (string, bool) {
	return a.placeWith(pod, func(func(string) nodeUsage, func(bool) []placedPod) string { return node })
}

// usageOf is the node's cpu (in millicores) and pod count as the accounts have them.
func usageOf(a *accounts, node string) (int64, int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	u := a.nodes[node]
	if u == nil {
		return 0, 0
	}
	cpu := u.requests[corev1.ResourceCPU]
	return cpu.MilliValue(), u.pods
}

func wantUsage(t *testing.T, a *accounts, node string, cpu int64, pods int) {
	t.Helper()
	if gotCPU, gotPods := usageOf(a, node); gotCPU != cpu || gotPods != pods {
		t.Errorf("%s: %dm cpu in %d pods, want %dm in %d", node, gotCPU, gotPods, cpu, pods)
	}
}

func TestAccountsBind(t *testing.T) {
	a := newAccounts()
	p := testPod("a", "", "500m")
	if node, known := placeOn(a, p, "n1"); node != "n1" || known {
		t.Fatalf("placed on %q (known %v)", node, known)
	}
	wantUsage(t, a, "n1", 500, 1)
	// A second placement of the same pod (a requeue while its binding is in flight) is refused.
	if node, known := placeOn(a, p, "n1"); node != "" || !known {
		t.Errorf("placed twice: %q, known %v", node, known)
	}
	// The cache still shows it pending, then bound: counted once all along.
	a.observe(p)
	wantUsage(t, a, "n1", 500, 1)
	bound := testPod("a", "n1", "500m")
	a.observe(bound)
	a.observe(bound) // a status update
	wantUsage(t, a, "n1", 500, 1)
	// The binding's failure comes too late to matter: the cache shows the pod bound.
	a.forgetAssumed(p.UID)
	wantUsage(t, a, "n1", 500, 1)
}

func TestAccountsBindFails(t *testing.T) {
	a := newAccounts()
	p := testPod("a", "", "1")
	placeOn(a, p, "n1")
	a.forgetAssumed(p.UID)
	wantUsage(t, a, "n1", 0, 0)
	// Another scheduler bound it elsewhere (our binding got a conflict): it counts where it is.
	placeOn(a, p, "n1")
	a.observe(testPod("a", "n2", "1"))
	a.forgetAssumed(p.UID)
	wantUsage(t, a, "n1", 0, 0)
	wantUsage(t, a, "n2", 1000, 1)
}

func TestAccountsDeletion(t *testing.T) {
	a := newAccounts()
	h := a.handler()
	h.OnAdd(testPod("a", "n1", "1"), true)
	h.OnAdd(testPod("b", "n1", "250m"), true)
	wantUsage(t, a, "n1", 1250, 2)
	h.OnDelete(testPod("a", "n1", "1"))
	wantUsage(t, a, "n1", 250, 1)
	// A deletion the informer missed arrives as a tombstone after a relist.
	h.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "ns/b", Obj: testPod("b", "n1", "250m")})
	wantUsage(t, a, "n1", 0, 0)
	if len(a.pods) != 0 {
		t.Errorf("%d entries left", len(a.pods))
	}
	// An assumed pod deleted before its binding showed.
	p := testPod("c", "", "1")
	placeOn(a, p, "n1")
	h.OnDelete(p)
	wantUsage(t, a, "n1", 0, 0)
	if len(a.pods) != 0 {
		t.Errorf("%d entries left", len(a.pods))
	}
}

func TestAccountsFinish(t *testing.T) {
	for _, phase := range []corev1.PodPhase{corev1.PodSucceeded, corev1.PodFailed} {
		a := newAccounts()
		h := a.handler()
		running := testPod("a", "n1", "1")
		h.OnAdd(running, true)
		h.OnUpdate(running, finished(running, phase))
		wantUsage(t, a, "n1", 0, 0)
		// An older view delivered late does not count it again; the deletion drops the entry.
		h.OnUpdate(running, running)
		wantUsage(t, a, "n1", 0, 0)
		h.OnDelete(finished(running, phase))
		if len(a.pods) != 0 {
			t.Errorf("%s: %d entries left", phase, len(a.pods))
		}
	}
}

// The retry watch's map function frees a pod's room before the accounts' handler has its event.
func TestAccountsLeftAhead(t *testing.T) {
	a := newAccounts()
	h := a.handler()
	p := testPod("a", "", "1")
	placeOn(a, p, "n1")
	bound := testPod("a", "n1", "1")
	a.left(p.UID) // the deletion, seen by the retry watch first
	wantUsage(t, a, "n1", 0, 0)
	h.OnUpdate(p, bound) // the handler catches up: the binding, then the deletion
	wantUsage(t, a, "n1", 0, 0)
	h.OnDelete(bound)
	if len(a.pods) != 0 {
		t.Errorf("%d entries left", len(a.pods))
	}
	// The handler first: the retry watch's late call finds nothing to do.
	h.OnAdd(bound, false)
	h.OnDelete(bound)
	a.left(bound.UID)
	wantUsage(t, a, "n1", 0, 0)
	if len(a.pods) != 0 {
		t.Errorf("%d entries left", len(a.pods))
	}
}

// A binder that starts again rebuilds its accounts from the cache's first list: the pods bound and
// running count, those finished do not.
func TestAccountsRestart(t *testing.T) {
	a := newAccounts()
	h := a.handler()
	h.OnAdd(testPod("a", "n1", "1"), true)
	h.OnAdd(testPod("b", "n2", "2"), true)
	h.OnAdd(finished(testPod("c", "n1", "4"), corev1.PodSucceeded), true)
	h.OnAdd(testPod("d", "", "8"), true) // pending
	wantUsage(t, a, "n1", 1000, 1)
	wantUsage(t, a, "n2", 2000, 1)
}

// recount sums the pods of the final state the way the binder once did for every placement.
func recount(pods map[types.UID]*corev1.Pod) (cpu map[string]int64, count map[string]int) {
	cpu, count = map[string]int64{}, map[string]int{}
	for _, p := range pods {
		if p.Spec.NodeName == "" || terminal(p) {
			continue
		}
		q := PodRequests(p)[corev1.ResourceCPU]
		cpu[p.Spec.NodeName] += q.MilliValue()
		count[p.Spec.NodeName]++
	}
	return cpu, count
}

// Placements, bindings, pods finishing and deletions from many goroutines at once (run with -race):
// once every event has been delivered the accounts equal a recount of the pods.
func TestAccountsConcurrent(t *testing.T) {
	a := newAccounts()
	h := a.handler()
	nodes := []string{"n1", "n2", "n3"}
	final := map[types.UID]*corev1.Pod{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 1))
			for i := range 200 {
				uid := fmt.Sprintf("p-%d-%d", w, i)
				pending := testPod(uid, "", fmt.Sprintf("%dm", 100+r.IntN(900)))
				h.OnAdd(pending, false)
				node, _ := a.placeWith(pending, func(usage func(string) nodeUsage, _ func(bool) []placedPod) string {
					best, bestCPU := "", int64(-1)
					for _, n := range nodes {
						u := usage(n)
						cpu := u.requests[corev1.ResourceCPU]
						if best == "" || cpu.MilliValue() < bestCPU {
							best, bestCPU = n, cpu.MilliValue()
						}
					}
					return best
				})
				if r.IntN(10) == 0 {
					a.forgetAssumed(pending.UID) // the binding failed
					h.OnDelete(pending)
					continue
				}
				bound := pending.DeepCopy()
				bound.Spec.NodeName = node
				h.OnUpdate(pending, bound)
				last := bound
				switch r.IntN(3) {
				case 0: // finishes
					last = finished(bound, corev1.PodSucceeded)
					if r.IntN(2) == 0 {
						a.left(bound.UID)
					}
					h.OnUpdate(bound, last)
				case 1: // deleted
					if r.IntN(2) == 0 {
						a.left(bound.UID)
					}
					h.OnDelete(bound)
					continue
				}
				mu.Lock()
				final[last.UID] = last
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	wantCPU, wantPods := recount(final)
	for _, n := range nodes {
		wantUsage(t, a, n, wantCPU[n], wantPods[n])
	}
}
