package rayservice

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
)

// upgradeInProgress reads the UpgradeInProgress condition.
func upgradeInProgress(rs *rayv1.RayService) bool {
	return meta.IsStatusConditionTrue(rs.Status.Conditions, string(rayv1.UpgradeInProgress))
}

// setCondition sets one condition, stamped with the observed generation.
func setCondition(rs *rayv1.RayService, t rayv1.RayServiceConditionType, s metav1.ConditionStatus, reason rayv1.RayServiceConditionReason, msg string) {
	meta.SetStatusCondition(&rs.Status.Conditions, metav1.Condition{
		Type: string(t), Status: s, Reason: string(reason), Message: msg, ObservedGeneration: rs.Status.ObservedGeneration,
	})
}

// setConditions derives Ready and UpgradeInProgress (and serviceStatus) from the status, as KubeRay
// v1.6 does: Ready once the serve Service has an endpoint (which it gets only after a cluster's
// applications all ran), False again if the endpoints drop to zero; UpgradeInProgress while both an
// active and a pending cluster exist. notReady, when set, explains a RayService not yet Ready (a
// refused Serve config, say) in the Ready condition's message.
func setConditions(rs *rayv1.RayService, notReady string) {
	st := &rs.Status
	if len(st.Conditions) == 0 {
		msg := "RayService is initializing"
		setCondition(rs, rayv1.RayServiceReady, metav1.ConditionFalse, rayv1.RayServiceInitializing, msg)
		setCondition(rs, rayv1.UpgradeInProgress, metav1.ConditionFalse, rayv1.RayServiceInitializing, msg)
	}
	ready := meta.FindStatusCondition(st.Conditions, string(rayv1.RayServiceReady))
	switch {
	case st.NumServeEndpoints > 0:
		setCondition(rs, rayv1.RayServiceReady, metav1.ConditionTrue, rayv1.NonZeroServeEndpoints, "Number of serve endpoints is greater than 0")
	case ready != nil && ready.Status == metav1.ConditionTrue:
		setCondition(rs, rayv1.RayServiceReady, metav1.ConditionFalse, rayv1.ZeroServeEndpoints, "Number of serve endpoints dropped to 0")
	case ready != nil && ready.Reason == string(rayv1.RayServiceInitializing) || ready != nil && ready.Reason == string(rayv1.RayServiceValidationFailed):
		msg := "RayService is initializing"
		if notReady != "" {
			msg += ": " + notReady
		}
		setCondition(rs, rayv1.RayServiceReady, metav1.ConditionFalse, rayv1.RayServiceInitializing, msg)
	}
	active, pending := st.ActiveServiceStatus.RayClusterName, st.PendingServiceStatus.RayClusterName
	switch {
	case active != "" && pending != "":
		setCondition(rs, rayv1.UpgradeInProgress, metav1.ConditionTrue, rayv1.BothActivePendingClustersExist, "Both active and pending Ray clusters exist")
	case active != "":
		setCondition(rs, rayv1.UpgradeInProgress, metav1.ConditionFalse, rayv1.NoPendingCluster, "Active Ray cluster exists and no pending Ray cluster")
	default:
		if c := meta.FindStatusCondition(st.Conditions, string(rayv1.UpgradeInProgress)); c == nil || c.Reason != string(rayv1.RayServiceInitializing) {
			setCondition(rs, rayv1.UpgradeInProgress, metav1.ConditionUnknown, rayv1.NoActiveCluster, "No active Ray cluster exists, and the RayService is not initializing")
		}
	}
	st.ServiceStatus = rayv1.NotRunning
	if meta.IsStatusConditionTrue(st.Conditions, string(rayv1.RayServiceReady)) {
		st.ServiceStatus = rayv1.Running
	}
}
