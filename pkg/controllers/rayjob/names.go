package rayjob

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/rand"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"

	"github.com/rayctl/rayctl/pkg/raydashboard"
)

// Names, labels and defaults shared with KubeRay, so that KubeRay's docs and
// kubectl habits (selectors, finalizer, container names) carry over.
const (
	// Name is the controller's name in the manager's registry and in the chain recorder.
	Name = "rayjob"
	// ControllerName is the source of the controller's events.
	ControllerName = "rayjob-controller"
	// DefaultRequeue is how often a RayJob in progress is looked at again.
	DefaultRequeue = 3 * time.Second
	// Finalizer lets the controller stop the Ray job before the RayJob goes away.
	Finalizer = "ray.io/rayjob-finalizer"
	// ClusterSelectorKey is the spec.clusterSelector key naming an existing RayCluster.
	ClusterSelectorKey = "ray.io/cluster"
	// SubmitterContainerName is the submitter's container, in the submitter Job
	// (K8sJobMode) or in the head Pod (SidecarMode).
	SubmitterContainerName = "ray-job-submitter"
	// DashboardPortName is the head container port (and head Service port) of the dashboard.
	DashboardPortName = raydashboard.DashboardPortName
	// DefaultDashboardPort is the dashboard's port when the head container names none.
	DefaultDashboardPort = raydashboard.DefaultDashboardPort
	// DefaultClusterDomain is the DNS domain of Services.
	DefaultClusterDomain = raydashboard.DefaultClusterDomain
	// MaxNameLength keeps generated RayCluster and Pod names within their limits.
	MaxNameLength = 47
	// KubeRayManagedBy is the spec.managedBy value this controller serves (as does an unset field).
	KubeRayManagedBy = "ray.io/kuberay-operator"
	// TransitionGracePeriod is how long a RayJob may stay Running after the
	// Ray job ended before it is closed anyway.
	TransitionGracePeriod = 300 * time.Second
	// SubmitterFinishedTimeout is how long a RayJob may wait for the Ray job to
	// end after its submitter has finished.
	SubmitterFinishedTimeout = 30 * time.Second
)

// Labels the controller puts on, or selects, objects (KubeRay's keys and values).
const (
	// LabelOriginName names the RayJob a RayCluster, Service or submitter Job was made for.
	LabelOriginName = "ray.io/originated-from-cr-name"
	// LabelOriginCRD is "RayJob" on everything this controller makes.
	LabelOriginCRD = "ray.io/originated-from-crd"
	// LabelCreatedBy is "kuberay-operator" on the submitter Job, which the
	// manager's optional Job cache selector (KubeRayJobSelector) matches.
	LabelCreatedBy = "app.kubernetes.io/created-by"
	// LabelCluster names the RayCluster of a Ray Pod.
	LabelCluster = "ray.io/cluster"
	// LabelNodeType is "head" or "worker" on a Ray Pod.
	LabelNodeType = "ray.io/node-type"

	originCRDRayJob  = "RayJob"
	createdByKubeRay = "kuberay-operator"
)

// Event reasons recorded on the RayJob: KubeRay's where it has one, plus
// SubmittedRayJob, FailedToSubmitRayJob, StoppedRayJob, Completed and Failed.
const (
	EventInvalidSpec           = "InvalidRayJobSpec"
	EventInvalidMetadata       = "InvalidRayJobMetadata"
	EventInvalidStatus         = "InvalidRayJobStatus"
	EventCreatedCluster        = "CreatedRayCluster"
	EventFailedCreateCluster   = "FailedToCreateRayCluster"
	EventDeletedCluster        = "DeletedRayCluster"
	EventFailedDeleteCluster   = "FailedToDeleteRayCluster"
	EventUpdatedCluster        = "UpdatedRayCluster"
	EventFailedUpdateCluster   = "FailedToUpdateRayCluster"
	EventClusterNotFound       = "RayClusterNotFound"
	EventCreatedSubmitter      = "CreatedRayJobSubmitter"
	EventFailedCreateSubmitter = "FailedToCreateRayJobSubmitter"
	EventDeletedSubmitter      = "DeletedRayJobSubmitter"
	EventFailedDeleteSubmitter = "FailedToDeleteRayJobSubmitter"
	EventCreatedService        = "CreatedService"
	EventUpdatedService        = "UpdatedService"
	EventFailedService         = "FailedToCreateService"
	EventSubmitted             = "SubmittedRayJob"
	EventFailedSubmit          = "FailedToSubmitRayJob"
	EventStopped               = "StoppedRayJob"
	EventSuspended             = "Suspended"
	EventCompleted             = "Completed"
	EventFailed                = "Failed"
)

// submissionMode returns the job's mode; the CRD defaults an unset one to K8sJobMode.
func submissionMode(job *rayv1.RayJob) rayv1.JobSubmissionMode {
	if job.Spec.SubmissionMode == "" {
		return rayv1.K8sJobMode
	}
	return job.Spec.SubmissionMode
}

// hasSubmitter reports whether something other than the controller submits the job.
func hasSubmitter(job *rayv1.RayJob) bool {
	m := submissionMode(job)
	return m == rayv1.K8sJobMode || m == rayv1.SidecarMode
}

// usesClusterSelector reports whether the job runs on an existing RayCluster.
func usesClusterSelector(job *rayv1.RayJob) bool { return len(job.Spec.ClusterSelector) > 0 }

// newRandomName returns base-xxxxx, KubeRay's form for RayCluster names and job ids.
func newRandomName(base string) string { return fmt.Sprintf("%s-%s", base, rand.String(5)) }

// submitterJobName is the submitter batch Job's name: the RayJob's own.
func submitterJobName(job *rayv1.RayJob) string { return job.Name }

// jobHeadServiceName is the head Service the RayJob owns, stable across retries.
func jobHeadServiceName(job *rayv1.RayJob) string { return job.Name + "-head-svc" }

// clusterHeadServiceName is the RayCluster's head Service.
func clusterHeadServiceName(c *rayv1.RayCluster) string { return raydashboard.HeadServiceName(c) }

// headContainer returns the Ray container of the head template (the first), or nil.
func headContainer(spec *rayv1.RayClusterSpec) *corev1.Container {
	return raydashboard.HeadContainer(spec)
}

// dashboardContainerPort is the head container's dashboard port.
func dashboardContainerPort(spec *rayv1.RayClusterSpec) int32 {
	return raydashboard.DashboardPort(spec)
}

// originLabels are the labels tying an object to the RayJob it was made for.
func originLabels(job *rayv1.RayJob) map[string]string {
	return map[string]string{
		LabelOriginName: job.Name,
		LabelOriginCRD:  originCRDRayJob,
		LabelCreatedBy:  createdByKubeRay,
	}
}
