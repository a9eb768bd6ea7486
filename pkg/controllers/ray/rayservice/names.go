package rayservice

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/rand"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"

	"github.com/rayctl/rayctl/pkg/rayparams"
)

// Names, labels and defaults shared with KubeRay v1.6, so that its docs and kubectl habits carry over.
const (
	// Name is the controller's name in the manager's registry and in the chain recorder.
	Name = "rayservice"
	// DefaultRequeue is how often a RayService is looked at again (KubeRay: 2 s): Serve's status
	// is only learnt by asking the dashboard.
	DefaultRequeue = 2 * time.Second
	// DefaultClusterDeletionDelay is how long a RayCluster the RayService no longer uses lives on
	// (spec.rayClusterDeletionDelaySeconds), so requests in flight on it can finish.
	DefaultClusterDeletionDelay = 60 * time.Second
	// DefaultAppName names the application Ray reports under the empty name.
	DefaultAppName = "default"
)

// Event reasons recorded on the RayService (KubeRay v1.6's).
const (
	EventInvalidSpec                 = "InvalidRayServiceSpec"
	EventCreatedCluster              = "CreatedRayCluster"
	EventFailedCreateCluster         = "FailedToCreateRayCluster"
	EventUpdatedCluster              = "UpdatedRayCluster"
	EventFailedUpdateCluster         = "FailedToUpdateRayCluster"
	EventDeletedCluster              = "DeletedRayCluster"
	EventFailedDeleteCluster         = "FailedToDeleteRayCluster"
	EventCreatedService              = "CreatedService"
	EventUpdatedService              = "UpdatedService"
	EventFailedCreateService         = "FailedToCreateService"
	EventFailedUpdateService         = "FailedToUpdateService"
	EventUpdatedServeApplications    = "UpdatedServeApplications"
	EventFailedUpdateServeApps       = "FailedToUpdateServeApplications"
	EventUpdatedHeadPodServeLabel    = "UpdatedHeadPodServeLabel"
	EventFailedUpdateHeadPodServeLbl = "FailedToUpdateHeadPodServeLabel"
	EventUpdatedServeTargetCapacity  = "UpdatedServeTargetCapacity"
	EventFailedUpdateTargetCapacity  = "FailedToUpdateTargetCapacity"
	EventFailedToCreateGateway       = "FailedToCreateGateway"
	EventFailedToCreateHTTPRoute     = "FailedToCreateHTTPRoute"
)

// newClusterName is KubeRay's RayCluster name for a RayService: <name>-<5 random lowercase alnum>.
func newClusterName(rs *rayv1.RayService) string {
	return fmt.Sprintf("%s-%s", rs.Name, rand.String(5))
}

// serveServiceName is the RayService's serve Service (spec.serveService's name if it has one).
func serveServiceName(rs *rayv1.RayService) string {
	if s := rs.Spec.ServeService; s != nil && s.Name != "" {
		return s.Name
	}
	return rs.Name + "-serve-svc"
}

// originLabels tie an object to the RayService it was made for.
func originLabels(rs *rayv1.RayService) map[string]string {
	return map[string]string{rayparams.LabelOriginName: rs.Name, rayparams.LabelOriginatedCRD: rayparams.OriginRayService}
}

// deletionDelay is spec.rayClusterDeletionDelaySeconds, or DefaultClusterDeletionDelay.
func deletionDelay(rs *rayv1.RayService) time.Duration {
	if d := rs.Spec.RayClusterDeletionDelaySeconds; d != nil && *d >= 0 {
		return time.Duration(*d) * time.Second
	}
	return DefaultClusterDeletionDelay
}
