package rayjob

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/rand"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"

	"github.com/rayctl/rayctl/pkg/rayparams"
)

// The controller's name and defaults (KubeRay's labels, finalizer and container names are in rayparams).
const (
	// Name is the controller's name in the manager's registry and in the chain recorder.
	Name = "rayjob"
	// ControllerName is the source of the controller's events.
	ControllerName = "rayjob-controller"
	// DefaultRequeue is how often a RayJob in progress is looked at again.
	DefaultRequeue = 3 * time.Second
	// MaxNameLength keeps generated RayCluster and Pod names within their limits.
	MaxNameLength = 47
	// TransitionGracePeriod is how long a RayJob may stay Running after the
	// Ray job ended before it is closed anyway.
	TransitionGracePeriod = 300 * time.Second
	// SubmitterFinishedTimeout is how long a RayJob may wait for the Ray job to
	// end after its submitter has finished.
	SubmitterFinishedTimeout = 30 * time.Second
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

// originLabels are the labels tying an object to the RayJob it was made for.
func originLabels(job *rayv1.RayJob) map[string]string {
	return map[string]string{
		rayparams.LabelOriginName:    job.Name,
		rayparams.LabelOriginatedCRD: rayparams.OriginRayJob,
		rayparams.LabelCreatedBy:     rayparams.CreatedBy,
	}
}
