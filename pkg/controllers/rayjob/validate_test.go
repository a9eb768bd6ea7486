package rayjob

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		mut  func(*rayv1.RayJob)
		want string // "" = valid
	}{
		{name: "HTTPMode with a cluster spec", mut: func(*rayv1.RayJob) {}},
		{name: "K8sJobMode by default", mut: func(j *rayv1.RayJob) { j.Spec.SubmissionMode = "" }},
		{name: "cluster selector", mut: func(j *rayv1.RayJob) {
			j.Spec.RayClusterSpec = nil
			j.Spec.ClusterSelector = map[string]string{ClusterSelectorKey: "shared"}
		}},
		{name: "InteractiveMode needs no entrypoint", mut: func(j *rayv1.RayJob) {
			j.Spec.SubmissionMode = rayv1.InteractiveMode
			j.Spec.Entrypoint = ""
		}},
		{name: "a submitter template with its own command needs no entrypoint", mut: func(j *rayv1.RayJob) {
			j.Spec.SubmissionMode = rayv1.K8sJobMode
			j.Spec.Entrypoint = ""
			j.Spec.SubmitterPodTemplate = &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Command: []string{"true"}}}}}
		}},
		{name: "neither cluster spec nor selector", mut: func(j *rayv1.RayJob) { j.Spec.RayClusterSpec = nil },
			want: "one of RayClusterSpec or ClusterSelector must be set"},
		{name: "empty entrypoint in HTTPMode", mut: func(j *rayv1.RayJob) { j.Spec.Entrypoint = "  " },
			want: "entrypoint must be set in HTTPMode"},
		{name: "empty entrypoint in K8sJobMode", mut: func(j *rayv1.RayJob) { j.Spec.Entrypoint, j.Spec.SubmissionMode = "", rayv1.K8sJobMode },
			want: "entrypoint must be set in K8sJobMode"},
		{name: "unknown mode", mut: func(j *rayv1.RayJob) { j.Spec.SubmissionMode = "FaxMode" },
			want: `unknown submissionMode "FaxMode"`},
		{name: "name too long", mut: func(j *rayv1.RayJob) { j.Name = strings.Repeat("a", 48) },
			want: "no more than 47 characters"},
		{name: "name not DNS-1035", mut: func(j *rayv1.RayJob) { j.Name = "1job" },
			want: "valid DNS1035 label"},
		{name: "suspend without shutdownAfterJobFinishes", mut: func(j *rayv1.RayJob) { j.Spec.Suspend = true },
			want: "not allowed to be suspended"},
		{name: "TTL without shutdownAfterJobFinishes", mut: func(j *rayv1.RayJob) { j.Spec.TTLSecondsAfterFinished = 5 },
			want: "cannot have TTLSecondsAfterFinished"},
		{name: "selector without a cluster name", mut: func(j *rayv1.RayJob) {
			j.Spec.RayClusterSpec = nil
			j.Spec.ClusterSelector = map[string]string{"team": "ml"}
		}, want: `clusterSelector must name the cluster under the key "ray.io/cluster"`},
		{name: "selector in SidecarMode", mut: func(j *rayv1.RayJob) {
			j.Spec.SubmissionMode = rayv1.SidecarMode
			j.Spec.ClusterSelector = map[string]string{ClusterSelectorKey: "shared"}
		}, want: "ClusterSelector is not supported in SidecarMode"},
		{name: "selector with suspend", mut: func(j *rayv1.RayJob) {
			j.Spec.ClusterSelector = map[string]string{ClusterSelectorKey: "shared"}
			j.Spec.Suspend, j.Spec.ShutdownAfterJobFinishes = true, true
		}, want: "doesn't support the suspend operation"},
		{name: "SidecarMode with a restarting head", mut: func(j *rayv1.RayJob) {
			j.Spec.SubmissionMode = rayv1.SidecarMode
			j.Spec.RayClusterSpec.HeadGroupSpec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways
		}, want: "restartPolicy for head Pod should be Never"},
		{name: "InteractiveMode with retries", mut: func(j *rayv1.RayJob) {
			j.Spec.SubmissionMode = rayv1.InteractiveMode
			j.Spec.BackoffLimit = ptr.To[int32](1)
		}, want: "BackoffLimit is incompatible with InteractiveMode"},
		{name: "Kubernetes-delegated token authentication", mut: func(j *rayv1.RayJob) {
			j.Spec.RayClusterSpec.AuthOptions = &rayv1.AuthOptions{Mode: rayv1.AuthModeToken, EnableK8sTokenAuth: ptr.To(true)}
		}, want: "enableK8sTokenAuth: Kubernetes-delegated token authentication is not supported for a RayJob"},
		{name: "head without containers", mut: func(j *rayv1.RayJob) {
			j.Spec.RayClusterSpec.HeadGroupSpec.Template.Spec.Containers = nil
		}, want: "headGroupSpec.template must have at least one container"},
		{name: "bad runtimeEnvYAML", mut: func(j *rayv1.RayJob) { j.Spec.RuntimeEnvYAML = "a: [" },
			want: "runtimeEnvYAML is not valid YAML"},
		{name: "bad entrypointResources", mut: func(j *rayv1.RayJob) { j.Spec.EntrypointResources = "disk=1" },
			want: "entrypointResources must be a JSON object"},
		{name: "non-positive activeDeadlineSeconds", mut: func(j *rayv1.RayJob) { j.Spec.ActiveDeadlineSeconds = ptr.To[int32](0) },
			want: "activeDeadlineSeconds must be a positive integer"},
		{name: "negative backoffLimit", mut: func(j *rayv1.RayJob) { j.Spec.BackoffLimit = ptr.To[int32](-1) },
			want: "backoffLimit must be a positive integer"},
		{name: "deletionStrategy", mut: func(j *rayv1.RayJob) { j.Spec.DeletionStrategy = &rayv1.DeletionStrategy{} },
			want: "deletionStrategy needs KubeRay's RayJobDeletionPolicy feature gate"},
		{name: "Waiting outside InteractiveMode", mut: func(j *rayv1.RayJob) {
			j.Status.JobDeploymentStatus = rayv1.JobDeploymentStatusWaiting
		}, want: "JobDeploymentStatus cannot be `Waiting`"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			j := newJob()
			tc.mut(j)
			err := Validate(j)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && err == nil:
				t.Fatalf("no error, want %q", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("error %q, want it to contain %q", err, tc.want)
			}
		})
	}
}
