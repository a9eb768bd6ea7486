package rayjob

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
)

// finishedJob is a RayJob whose Ray job ended with status at end, with its cluster demo-xyz12.
func finishedJob(status rayv1.JobStatus, end time.Time, mut ...func(*rayv1.RayJob)) *rayv1.RayJob {
	deploy := rayv1.JobDeploymentStatusComplete
	if status == rayv1.JobStatusFailed {
		deploy = rayv1.JobDeploymentStatusFailed
	}
	return newJob(append([]func(*rayv1.RayJob){at(deploy), func(j *rayv1.RayJob) {
		j.Status.JobStatus = status
		j.Status.EndTime = &metav1.Time{Time: end}
	}}, mut...)...)
}

// clusterWithWorkers is demo-xyz12 with two worker groups.
func clusterWithWorkers() *rayv1.RayCluster {
	c := newCluster("demo-xyz12", rayv1.Ready)
	for _, g := range []string{"small", "large"} {
		c.Spec.WorkerGroupSpecs = append(c.Spec.WorkerGroupSpecs, rayv1.WorkerGroupSpec{GroupName: g, Replicas: ptr.To[int32](1)})
	}
	return c
}

// state says what is left: "suspended" workers, the cluster, the RayJob.
func (h *harness) state(t *testing.T) string {
	t.Helper()
	var parts []string
	c := &rayv1.RayCluster{}
	switch {
	case !h.exists(t, c, "demo-xyz12"):
		parts = append(parts, "cluster gone")
	default:
		var n int
		for _, g := range c.Spec.WorkerGroupSpecs {
			if ptr.Deref(g.Suspend, false) {
				n++
			}
		}
		parts = append(parts, map[bool]string{true: "workers suspended", false: "workers running"}[n == len(c.Spec.WorkerGroupSpecs)])
	}
	j := &rayv1.RayJob{}
	if h.exists(t, j, "demo") && j.DeletionTimestamp.IsZero() {
		parts = append(parts, "rayjob kept")
	} else {
		parts = append(parts, "rayjob deleted")
	}
	return strings.Join(parts, ", ")
}

// TestDeletionRulesInStages: KubeRay's sample rules (workers at 30 s, the cluster at 60 s, the RayJob
// at 90 s) run in that order, each only once its TTL has passed since the end, with a requeue for
// the next one; the rules of the other outcome are ignored.
func TestDeletionRulesInStages(t *testing.T) {
	for _, status := range []rayv1.JobStatus{rayv1.JobStatusSucceeded, rayv1.JobStatusFailed} {
		t.Run(string(status), func(t *testing.T) {
			end := time.Now().Truncate(time.Second)
			other := map[rayv1.JobStatus]string{rayv1.JobStatusSucceeded: "FAILED", rayv1.JobStatusFailed: "SUCCEEDED"}[status]
			job := finishedJob(status, end, rules(
				rule(rayv1.DeleteSelf, other, 1), // never matches
				rule(rayv1.DeleteWorkers, string(status), 30), rule(rayv1.DeleteCluster, string(status), 60), rule(rayv1.DeleteSelf, string(status), 90)))
			h := newHarness(t, job, clusterWithWorkers())
			for _, step := range []struct {
				after   time.Duration
				want    string
				requeue time.Duration // 0: none
			}{
				{10 * time.Second, "workers running, rayjob kept", 20 * time.Second},
				{31 * time.Second, "workers suspended, rayjob kept", 29 * time.Second},
				{45 * time.Second, "workers suspended, rayjob kept", 15 * time.Second},
				{61 * time.Second, "cluster gone, rayjob kept", 29 * time.Second},
				{91 * time.Second, "cluster gone, rayjob deleted", 0},
			} {
				h.now = end.Add(step.after)
				res := h.reconcile(t)
				if got := h.state(t); got != step.want {
					t.Fatalf("%v after the end: %s, want %s", step.after, got, step.want)
				}
				if d := res.RequeueAfter - step.requeue; d < 0 || d > 2*time.Second || (step.requeue == 0) != (res.RequeueAfter == 0) {
					t.Errorf("%v after the end: requeue after %v, want about %v", step.after, res.RequeueAfter, step.requeue)
				}
			}
			if ev := h.eventsSeen(); !strings.Contains(ev, EventUpdatedCluster) || !strings.Contains(ev, EventDeletedCluster) {
				t.Errorf("events %q lack %s and %s", ev, EventUpdatedCluster, EventDeletedCluster)
			}
		})
	}
}

// TestDeletionRulesOverdueRunTheMostDestructive: rules all overdue at once (the controller was down)
// run the one that destroys most first: DeleteCluster rather than DeleteWorkers.
func TestDeletionRulesOverdueRunTheMostDestructive(t *testing.T) {
	end := time.Now().Truncate(time.Second)
	job := finishedJob(rayv1.JobStatusSucceeded, end, rules(rule(rayv1.DeleteWorkers, "SUCCEEDED", 10), rule(rayv1.DeleteCluster, "SUCCEEDED", 20)))
	h := newHarness(t, job, clusterWithWorkers())
	h.now = end.Add(time.Minute)
	if res := h.reconcile(t); res.RequeueAfter != 0 {
		t.Errorf("requeue after %v with every rule done", res.RequeueAfter)
	}
	if got := h.state(t); got != "cluster gone, rayjob kept" {
		t.Fatalf("%s, want the cluster deleted at once", got)
	}
	if ev := h.eventsSeen(); strings.Contains(ev, EventUpdatedCluster) {
		t.Errorf("the workers were suspended before the cluster went: %s", ev)
	}
}

// TestDeletionRuleOnDeploymentStatus: a rule on jobDeploymentStatus Failed applies to a RayJob whose
// deployment failed whatever the Ray job's status; a jobStatus rule does not.
func TestDeletionRuleOnDeploymentStatus(t *testing.T) {
	end := time.Now().Truncate(time.Second)
	job := finishedJob(rayv1.JobStatusFailed, end, rules(rule(rayv1.DeleteSelf, "FAILED", 0), rule(rayv1.DeleteCluster, "deploy:Failed", 0)),
		func(j *rayv1.RayJob) {
			j.Status.JobStatus = rayv1.JobStatusRunning
			j.Status.Reason = rayv1.DeadlineExceeded
		})
	h := newHarness(t, job, clusterWithWorkers())
	h.now = end.Add(time.Second)
	h.reconcile(t)
	if got := h.state(t); got != "cluster gone, rayjob kept" {
		t.Fatalf("%s, want the cluster deleted and the RayJob kept", got)
	}
}

// TestLegacyDeletionPolicies: onSuccess/onFailure apply by the Ray job's outcome, after
// ttlSecondsAfterFinished.
func TestLegacyDeletionPolicies(t *testing.T) {
	end := time.Now().Truncate(time.Second)
	for _, tc := range []struct {
		status rayv1.JobStatus
		want   string
	}{
		{rayv1.JobStatusSucceeded, "workers suspended, rayjob kept"},
		{rayv1.JobStatusFailed, "cluster gone, rayjob kept"},
		{rayv1.JobStatusStopped, "workers running, rayjob kept"},
	} {
		t.Run(string(tc.status), func(t *testing.T) {
			job := finishedJob(tc.status, end, shutdown, legacy(rayv1.DeleteWorkers, rayv1.DeleteCluster),
				func(j *rayv1.RayJob) { j.Spec.TTLSecondsAfterFinished = 30 })
			h := newHarness(t, job, clusterWithWorkers())
			h.now = end.Add(10 * time.Second)
			h.reconcile(t)
			if got := h.state(t); got != "workers running, rayjob kept" {
				t.Fatalf("before the TTL: %s", got)
			}
			h.now = end.Add(31 * time.Second)
			h.reconcile(t)
			if got := h.state(t); got != tc.want {
				t.Fatalf("after the TTL: %s, want %s", got, tc.want)
			}
		})
	}
}
