package status

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestStatusIsWrittenOnlyWhenItChanges(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-1", ResourceVersion: "1"},
		Status:     corev1.PodStatus{Phase: corev1.PodPending, QOSClass: corev1.PodQOSBestEffort},
	}
	client := fake.NewClientset(pod)
	var hooked []string
	m := NewManager(client, func(p *corev1.Pod, rv string) { hooked = append(hooked, rv) })
	ctx := context.Background()
	patches := func() int {
		n := 0
		for _, a := range client.Actions() {
			if a.GetVerb() == "patch" && a.GetSubresource() == "status" {
				n++
			}
		}
		return n
	}

	// The same status as the API holds: nothing to write.
	if wrote, err := m.SetPodStatus(ctx, pod, pod.Status); err != nil || wrote {
		t.Fatalf("unchanged status: wrote=%v err=%v", wrote, err)
	}
	running := *pod.Status.DeepCopy()
	running.Phase = corev1.PodRunning
	// Sub-second differences vanish on the wire, so they are no change either.
	now := time.Now()
	running.StartTime = &metav1.Time{Time: now}
	if wrote, err := m.SetPodStatus(ctx, pod, running); err != nil || !wrote {
		t.Fatalf("changed status: wrote=%v err=%v", wrote, err)
	}
	for i := 0; i < 5; i++ {
		again := *running.DeepCopy()
		again.StartTime = &metav1.Time{Time: now.Add(time.Duration(i) * time.Millisecond)}
		if wrote, err := m.SetPodStatus(ctx, pod, again); err != nil || wrote {
			t.Fatalf("repeat %d: wrote=%v err=%v", i, wrote, err)
		}
	}
	if n := patches(); n != 1 {
		t.Errorf("%d status patches, want 1", n)
	}
	if len(hooked) != 1 || m.Writes() != 1 {
		t.Errorf("hook calls %v, writes %d; want one each", hooked, m.Writes())
	}
	got, err := client.CoreV1().Pods("ns").Get(ctx, "p", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase != corev1.PodRunning || got.Status.QOSClass != corev1.PodQOSBestEffort {
		t.Errorf("stored status = %+v", got.Status)
	}
}

func TestPatchIsGuardedByUIDAndCarriesOnlyChanges(t *testing.T) {
	old := corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}}
	next := *old.DeepCopy()
	next.Phase = corev1.PodRunning
	b, err := Patch("uid-9", old, next)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"metadata":{"uid":"uid-9"},"status":{"phase":"Running"}}`
	if string(b) != want {
		t.Errorf("patch = %s, want %s", b, want)
	}
}
