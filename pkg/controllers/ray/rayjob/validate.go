package rayjob

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"

	"github.com/rayctl/rayctl/pkg/controllers/ray/raycluster"
	"github.com/rayctl/rayctl/pkg/rayparams"
)

// ValidationError is a RayJob the controller refuses to run; the RayJob goes
// to ValidationFailed with Error() as its message and Reason as the event reason.
type ValidationError struct {
	// Reason is the event reason (EventInvalidMetadata, EventInvalidSpec, EventInvalidStatus).
	Reason string
	// Msg explains what is wrong.
	Msg string
}

// Error returns the message.
func (e *ValidationError) Error() string { return e.Msg }

func invalid(reason, format string, args ...any) *ValidationError {
	return &ValidationError{Reason: reason, Msg: fmt.Sprintf(format, args...)}
}

// Validate checks a RayJob the way KubeRay does before acting on it (name,
// spec, status), plus an entrypoint check: every mode but InteractiveMode needs
// one, unless a K8sJobMode submitter template brings its own command.
func Validate(job *rayv1.RayJob) error {
	if err := validateMetadata(job); err != nil {
		return err
	}
	if err := validateSpec(job); err != nil {
		return err
	}
	if job.Status.JobDeploymentStatus == rayv1.JobDeploymentStatusWaiting && submissionMode(job) != rayv1.InteractiveMode {
		return invalid(EventInvalidStatus, "The RayJob status is invalid: JobDeploymentStatus cannot be `Waiting` when SubmissionMode is not InteractiveMode")
	}
	return nil
}

func validateMetadata(job *rayv1.RayJob) error {
	if len(job.Name) > MaxNameLength {
		return invalid(EventInvalidMetadata, "The RayJob metadata is invalid: RayJob name should be no more than %d characters", MaxNameLength)
	}
	if errs := validation.IsDNS1035Label(job.Name); len(errs) > 0 {
		return invalid(EventInvalidMetadata, "The RayJob metadata is invalid: RayJob name should be a valid DNS1035 label: %v", errs)
	}
	return nil
}

func validateSpec(job *rayv1.RayJob) error {
	spec := &job.Spec
	bad := func(format string, args ...any) error {
		return invalid(EventInvalidSpec, "The RayJob spec is invalid: "+format, args...)
	}
	mode := submissionMode(job)
	switch mode {
	case rayv1.K8sJobMode, rayv1.HTTPMode, rayv1.SidecarMode, rayv1.InteractiveMode:
	default:
		return bad("unknown submissionMode %q", mode)
	}
	if spec.Suspend && !spec.ShutdownAfterJobFinishes {
		return bad("a RayJob with shutdownAfterJobFinishes set to false is not allowed to be suspended")
	}
	if spec.TTLSecondsAfterFinished < 0 {
		return bad("TTLSecondsAfterFinished must be a non-negative integer")
	}
	if !spec.ShutdownAfterJobFinishes && spec.TTLSecondsAfterFinished > 0 {
		return bad("a RayJob with shutdownAfterJobFinishes set to false cannot have TTLSecondsAfterFinished")
	}
	if err := validateDeletionStrategy(job); err != nil {
		return err
	}
	selector := usesClusterSelector(job)
	if spec.Suspend && selector {
		return bad("the ClusterSelector mode doesn't support the suspend operation")
	}
	if spec.RayClusterSpec == nil && !selector {
		return bad("one of RayClusterSpec or ClusterSelector must be set")
	}
	if selector {
		if spec.ClusterSelector[rayparams.LabelCluster] == "" {
			return bad("clusterSelector must name the cluster under the key %q", rayparams.LabelCluster)
		}
		if mode == rayv1.SidecarMode {
			return bad("ClusterSelector is not supported in SidecarMode")
		}
	}
	if mode == rayv1.InteractiveMode && spec.BackoffLimit != nil && *spec.BackoffLimit > 0 {
		return bad("BackoffLimit is incompatible with InteractiveMode")
	}
	if raycluster.K8sTokenAuth(spec.RayClusterSpec) {
		return bad("rayClusterSpec.authOptions.enableK8sTokenAuth: Kubernetes-delegated token authentication is not supported for a RayJob (as in KubeRay v1.7)")
	}
	if mode == rayv1.SidecarMode {
		if spec.SubmitterPodTemplate != nil {
			return bad("SidecarMode doesn't support SubmitterPodTemplate")
		}
		if spec.SubmitterConfig != nil {
			return bad("SidecarMode doesn't support SubmitterConfig")
		}
		if rp := spec.RayClusterSpec.HeadGroupSpec.Template.Spec.RestartPolicy; rp != "" && rp != corev1.RestartPolicyNever {
			return bad("restartPolicy for head Pod should be Never or unset when using SidecarMode")
		}
	}
	if mode != rayv1.InteractiveMode && strings.TrimSpace(spec.Entrypoint) == "" && !customSubmitterCommand(job) {
		return bad("entrypoint must be set in %s", mode)
	}
	if spec.RayClusterSpec != nil {
		if err := validateClusterSpec(spec.RayClusterSpec); err != nil {
			return bad("%v", err)
		}
	}
	if _, err := runtimeEnv(spec.RuntimeEnvYAML); err != nil {
		return bad("runtimeEnvYAML is not valid YAML: %v", err)
	}
	if _, err := entrypointResources(spec.EntrypointResources); err != nil {
		return bad("entrypointResources must be a JSON object of numbers: %v", err)
	}
	if spec.ActiveDeadlineSeconds != nil && *spec.ActiveDeadlineSeconds <= 0 {
		return bad("activeDeadlineSeconds must be a positive integer")
	}
	if spec.BackoffLimit != nil && *spec.BackoffLimit < 0 {
		return bad("backoffLimit must be a positive integer")
	}
	return nil
}

// customSubmitterCommand reports whether a K8sJobMode submitter template sets
// its own command, in which case the entrypoint is the template's business.
func customSubmitterCommand(job *rayv1.RayJob) bool {
	t := job.Spec.SubmitterPodTemplate
	return submissionMode(job) == rayv1.K8sJobMode && t != nil && len(t.Spec.Containers) > 0 && len(t.Spec.Containers[0].Command) > 0
}

// validateClusterSpec checks what the RayJob controller itself relies on: a
// head container (its image runs the submitter) and named, populated worker groups.
func validateClusterSpec(spec *rayv1.RayClusterSpec) error {
	if rayparams.HeadContainer(spec) == nil {
		return errors.New("headGroupSpec.template must have at least one container")
	}
	seen := map[string]bool{}
	for _, wg := range spec.WorkerGroupSpecs {
		if wg.GroupName == "" {
			return errors.New("every worker group needs a groupName")
		}
		if seen[wg.GroupName] {
			return fmt.Errorf("worker group name %q is used twice", wg.GroupName)
		}
		seen[wg.GroupName] = true
		if len(wg.Template.Spec.Containers) == 0 {
			return fmt.Errorf("worker group %q: template must have at least one container", wg.GroupName)
		}
	}
	return nil
}

// runtimeEnv parses spec.runtimeEnvYAML; an empty one is nil.
func runtimeEnv(s string) (map[string]any, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var env map[string]any
	if err := yaml.Unmarshal([]byte(s), &env); err != nil {
		return nil, err
	}
	return env, nil
}

// runtimeEnvJSON renders spec.runtimeEnvYAML as JSON for `--runtime-env-json`.
func runtimeEnvJSON(s string) (string, error) {
	if strings.TrimSpace(s) == "" {
		return "", nil
	}
	b, err := yaml.YAMLToJSON([]byte(s))
	return string(b), err
}

// entrypointResources parses spec.entrypointResources; an empty one is nil.
func entrypointResources(s string) (map[string]float32, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var res map[string]float32
	if err := json.Unmarshal([]byte(s), &res); err != nil {
		return nil, err
	}
	return res, nil
}
