package rayservice

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/rand"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"

	"github.com/rayctl/rayctl/pkg/controllers/raycluster"
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
	// KubeRayManagedBy is the spec.managedBy value this controller serves (as does an unset field).
	KubeRayManagedBy = "ray.io/kuberay-operator"
	// DefaultAppName names the application Ray reports under the empty name.
	DefaultAppName = "default"
)

// Labels and annotations (KubeRay's keys).
const (
	// LabelOriginName names the RayService a RayCluster or Service was made for.
	LabelOriginName = "ray.io/originated-from-cr-name"
	// AnnotationClusterHash is the hash of the RayCluster spec (without replica counts) a cluster
	// was made from: a RayService whose spec hashes differently wants a new cluster.
	AnnotationClusterHash = "ray.io/hash-without-replicas-and-workers-to-delete"
	// AnnotationNumWorkerGroups is the number of worker groups the cluster was made with.
	AnnotationNumWorkerGroups = "ray.io/num-worker-groups"

	originCRD = "RayService"
)

// Ports of the head container (KubeRay's names and defaults).
const (
	// ServingPortName is the head container port of Serve's HTTP proxy.
	ServingPortName = "serve"
	// DefaultServingPort is Serve's HTTP port when the head names none.
	DefaultServingPort = 8000
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

// headServiceName is the RayService's head Service.
func headServiceName(rs *rayv1.RayService) string { return rs.Name + "-head-svc" }

// serveServiceName is the RayService's serve Service (spec.serveService's name if it has one).
func serveServiceName(rs *rayv1.RayService) string {
	if s := rs.Spec.ServeService; s != nil && s.Name != "" {
		return s.Name
	}
	return rs.Name + "-serve-svc"
}

// originLabels tie an object to the RayService it was made for.
func originLabels(rs *rayv1.RayService) map[string]string {
	return map[string]string{LabelOriginName: rs.Name, raycluster.LabelOriginatedCRD: originCRD}
}

// deletionDelay is spec.rayClusterDeletionDelaySeconds, or DefaultClusterDeletionDelay.
func deletionDelay(rs *rayv1.RayService) time.Duration {
	if d := rs.Spec.RayClusterDeletionDelaySeconds; d != nil && *d >= 0 {
		return time.Duration(*d) * time.Second
	}
	return DefaultClusterDeletionDelay
}
