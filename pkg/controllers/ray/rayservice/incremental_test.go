package rayservice

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"

	"github.com/rayctl/rayctl/pkg/rayparams"
)

// incrementalService is a RayService mid-upgrade: active "old", pending "new", steps of 25 every 10 s.
func incrementalService() *rayv1.RayService {
	rs := service()
	rs.Spec.RayClusterSpec.EnableInTreeAutoscaling = ptr.To(true)
	rs.Spec.UpgradeStrategy = &rayv1.RayServiceUpgradeStrategy{Type: ptr.To(rayv1.RayServiceNewClusterWithIncrementalUpgrade),
		ClusterUpgradeOptions: &rayv1.ClusterUpgradeOptions{GatewayClassName: "rayctl", StepSizePercent: ptr.To[int32](25), IntervalSeconds: ptr.To[int32](10), MaxSurgePercent: ptr.To[int32](50)}}
	rs.Status.ActiveServiceStatus = rayv1.RayServiceStatus{RayClusterName: "old", TargetCapacity: ptr.To[int32](100), TrafficRoutedPercent: ptr.To[int32](100)}
	rs.Status.PendingServiceStatus = rayv1.RayServiceStatus{RayClusterName: "new", TargetCapacity: ptr.To[int32](50), TrafficRoutedPercent: ptr.To[int32](0)}
	meta.SetStatusCondition(&rs.Status.Conditions, metav1.Condition{Type: string(rayv1.UpgradeInProgress), Status: metav1.ConditionTrue, Reason: "x"})
	return rs
}

// TestTrafficSplit: traffic moves one step per interval towards the pending cluster, never beyond its
// target capacity, not before the interval, not while its applications do not run; rolling back, it
// moves back the same way.
func TestTrafficSplit(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rs := incrementalService()
	p := &pass{r: &reconciler{opts: Options{GatewayAPI: true}}, rs: rs, now: now, requeue: time.Hour}
	if a, b := p.trafficSplit(false); a != 100 || b != 0 {
		t.Errorf("pending not ready: %d/%d, want 100/0", a, b)
	}
	if a, b := p.trafficSplit(true); a != 75 || b != 25 {
		t.Errorf("first step: %d/%d, want 75/25", a, b)
	}
	rs.Status.PendingServiceStatus.TrafficRoutedPercent = ptr.To[int32](25)
	rs.Status.ActiveServiceStatus.TrafficRoutedPercent = ptr.To[int32](75)
	rs.Status.PendingServiceStatus.LastTrafficMigratedTime = &metav1.Time{Time: now.Add(-5 * time.Second)}
	if a, b := p.trafficSplit(true); a != 75 || b != 25 || p.requeue > 5*time.Second+time.Second {
		t.Errorf("before the interval: %d/%d (requeue %v), want 75/25 and a requeue within 5 s", a, b, p.requeue)
	}
	rs.Status.PendingServiceStatus.LastTrafficMigratedTime = &metav1.Time{Time: now.Add(-10 * time.Second)}
	if a, b := p.trafficSplit(true); a != 50 || b != 50 {
		t.Errorf("second step: %d/%d, want 50/50", a, b)
	}
	rs.Status.PendingServiceStatus.TrafficRoutedPercent = ptr.To[int32](50)
	rs.Status.ActiveServiceStatus.TrafficRoutedPercent = ptr.To[int32](50)
	if a, b := p.trafficSplit(true); a != 50 || b != 50 {
		t.Errorf("at the pending cluster's capacity (50): %d/%d, want 50/50", a, b)
	}
	meta.SetStatusCondition(&rs.Status.Conditions, metav1.Condition{Type: string(rayv1.RollbackInProgress), Status: metav1.ConditionTrue, Reason: "x"})
	if a, b := p.trafficSplit(false); a != 75 || b != 25 {
		t.Errorf("rolling back: %d/%d, want 75/25", a, b)
	}
}

// TestIncrementalPromotionAndRollback: promotion waits for the old cluster's capacity at 0 and all traffic
// on the new one; a goal spec back at the active cluster's starts a rollback, which completes once
// traffic and capacity are back, dropping the pending cluster.
func TestIncrementalPromotionAndRollback(t *testing.T) {
	rs := incrementalService()
	p := &pass{r: &reconciler{opts: Options{GatewayAPI: true}}, rs: rs}
	pending := &rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Name: "new"}}
	if p.incrementalPromotion(pending) {
		t.Error("promoted with traffic still on the old cluster")
	}
	rs.Status.ActiveServiceStatus.TargetCapacity = ptr.To[int32](0)
	rs.Status.PendingServiceStatus.TrafficRoutedPercent = ptr.To[int32](100)
	if !p.incrementalPromotion(pending) {
		t.Error("not promoted with the old cluster at capacity 0 and all traffic on the new one")
	}

	rs = incrementalService()
	p.rs = rs
	hash, err := clusterSpecHash(rs.Spec.RayClusterSpec)
	if err != nil {
		t.Fatal(err)
	}
	active := &rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Name: "old", Annotations: map[string]string{rayparams.AnnotationClusterHash: hash}}}
	pending.Annotations = map[string]string{rayparams.AnnotationClusterHash: "other"}
	p.reconcileRollback(active, pending)
	c := meta.FindStatusCondition(rs.Status.Conditions, string(rayv1.RollbackInProgress))
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != string(reasonDesiredClusterSpecChanged) || !strings.Contains(c.Message, "reverted") {
		t.Fatalf("goal back at the active cluster's spec: RollbackInProgress %+v", c)
	}
	if shouldPrepareNewCluster(rs, active, pending, false, true) {
		t.Error("a new cluster prepared during a rollback")
	}
	rs.Status.PendingServiceStatus.TargetCapacity = ptr.To[int32](0)
	rs.Status.PendingServiceStatus.TrafficRoutedPercent = ptr.To[int32](0)
	if p.incrementalPromotion(pending) || rs.Status.PendingServiceStatus.RayClusterName != "" || rollingBack(rs) {
		t.Errorf("rollback with traffic and capacity back: pending %q, rolling back %v", rs.Status.PendingServiceStatus.RayClusterName, rollingBack(rs))
	}
}

func TestValidateIncremental(t *testing.T) {
	rs := incrementalService()
	if err := validateIncremental(rs); err != nil {
		t.Fatal(err)
	}
	rs.Spec.UpgradeStrategy.ClusterUpgradeOptions.StepSizePercent = ptr.To[int32](60)
	if err := validateIncremental(rs); err == nil || !strings.Contains(err.Error(), "clusterUpgradeOptions.stepSizePercent") {
		t.Errorf("stepSizePercent above maxSurgePercent: %v", err)
	}
	rs.Spec.RayClusterSpec.EnableInTreeAutoscaling = nil
	if err := validateIncremental(rs); err == nil || !strings.Contains(err.Error(), "enableInTreeAutoscaling") {
		t.Errorf("no autoscaler: %v", err)
	}
}
