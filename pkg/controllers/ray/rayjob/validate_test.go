package rayjob

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"github.com/rayctl/rayctl/pkg/rayparams"
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
			j.Spec.ClusterSelector = map[string]string{rayparams.LabelCluster: "shared"}
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
			j.Spec.ClusterSelector = map[string]string{rayparams.LabelCluster: "shared"}
		}, want: "ClusterSelector is not supported in SidecarMode"},
		{name: "selector with suspend", mut: func(j *rayv1.RayJob) {
			j.Spec.ClusterSelector = map[string]string{rayparams.LabelCluster: "shared"}
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
		{name: "Waiting outside InteractiveMode", mut: func(j *rayv1.RayJob) {
			j.Status.JobDeploymentStatus = rayv1.JobDeploymentStatusWaiting
		}, want: "JobDeploymentStatus cannot be `Waiting`"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			j := newJob()
			tc.mut(j)
			checkValidate(t, j, tc.want)
		})
	}
}

// checkValidate fails t unless Validate(j) fails with a message containing want ("": passes), and
// returns Validate's error.
func checkValidate(t *testing.T, j *rayv1.RayJob, want string) error {
	t.Helper()
	err := Validate(j)
	switch {
	case want == "" && err != nil:
		t.Fatalf("unexpected error: %v", err)
	case want != "" && err == nil:
		t.Fatalf("no error, want %q", want)
	case want != "" && !strings.Contains(err.Error(), want):
		t.Fatalf("error %q, want it to contain %q", err, want)
	}
	return err
}

// rule is a deletion rule on a jobStatus (or, with a "deploy:" prefix, a jobDeploymentStatus).
func rule(policy rayv1.DeletionPolicyType, on string, ttl int32) rayv1.DeletionRule {
	r := rayv1.DeletionRule{Policy: policy, Condition: rayv1.DeletionCondition{TTLSeconds: ttl}}
	if d, ok := strings.CutPrefix(on, "deploy:"); ok {
		r.Condition.JobDeploymentStatus = ptr.To(rayv1.JobDeploymentStatus(d))
	} else {
		r.Condition.JobStatus = ptr.To(rayv1.JobStatus(on))
	}
	return r
}

func rules(rs ...rayv1.DeletionRule) func(*rayv1.RayJob) {
	return func(j *rayv1.RayJob) { j.Spec.DeletionStrategy = &rayv1.DeletionStrategy{DeletionRules: rs} }
}

func legacy(onSuccess, onFailure rayv1.DeletionPolicyType) func(*rayv1.RayJob) {
	return func(j *rayv1.RayJob) {
		j.Spec.DeletionStrategy = &rayv1.DeletionStrategy{
			OnSuccess: &rayv1.DeletionPolicy{Policy: ptr.To(onSuccess)},
			OnFailure: &rayv1.DeletionPolicy{Policy: ptr.To(onFailure)},
		}
	}
}

func selector(j *rayv1.RayJob) {
	j.Spec.RayClusterSpec = nil
	j.Spec.ClusterSelector = map[string]string{rayparams.LabelCluster: "shared"}
}

func autoscaled(j *rayv1.RayJob) { j.Spec.RayClusterSpec.EnableInTreeAutoscaling = ptr.To(true) }

func shutdown(j *rayv1.RayJob) { j.Spec.ShutdownAfterJobFinishes = true }

// TestValidateDeletionStrategy: spec.deletionStrategy is accepted and refused as KubeRay v1.7
// (RayJobDeletionPolicy on, its default) accepts and refuses it, with its messages.
func TestValidateDeletionStrategy(t *testing.T) {
	sample := rules( // KubeRay's ray-job.deletion-rules.yaml
		rule(rayv1.DeleteWorkers, "FAILED", 30), rule(rayv1.DeleteCluster, "FAILED", 60), rule(rayv1.DeleteSelf, "FAILED", 90),
		rule(rayv1.DeleteWorkers, "SUCCEEDED", 30), rule(rayv1.DeleteCluster, "SUCCEEDED", 60), rule(rayv1.DeleteSelf, "SUCCEEDED", 90))
	tests := []struct {
		name string
		mut  []func(*rayv1.RayJob)
		want string // "" = valid; several lines must all be in the message
	}{
		{name: "KubeRay's sample rules", mut: []func(*rayv1.RayJob){sample}},
		{name: "a rule on the deployment status", mut: []func(*rayv1.RayJob){rules(rule(rayv1.DeleteCluster, "deploy:Failed", 0))}},
		{name: "equal TTLs", mut: []func(*rayv1.RayJob){rules(rule(rayv1.DeleteWorkers, "FAILED", 5), rule(rayv1.DeleteCluster, "FAILED", 5))}},
		{name: "DeleteSelf on a selected cluster", mut: []func(*rayv1.RayJob){selector, rules(rule(rayv1.DeleteSelf, "SUCCEEDED", 0))}},
		{name: "DeleteNone beside the autoscaler", mut: []func(*rayv1.RayJob){autoscaled, rules(rule(rayv1.DeleteNone, "FAILED", 0))}},
		{name: "legacy policies", mut: []func(*rayv1.RayJob){legacy(rayv1.DeleteCluster, rayv1.DeleteNone)}},
		{name: "legacy policies with shutdownAfterJobFinishes", mut: []func(*rayv1.RayJob){shutdown, legacy(rayv1.DeleteCluster, rayv1.DeleteWorkers)}},
		{name: "legacy DeleteSelf with a TTL", mut: []func(*rayv1.RayJob){shutdown, legacy(rayv1.DeleteSelf, rayv1.DeleteSelf),
			func(j *rayv1.RayJob) { j.Spec.TTLSecondsAfterFinished = 10 }}},

		{name: "rules with shutdownAfterJobFinishes", mut: []func(*rayv1.RayJob){shutdown, sample},
			want: "The RayJob spec is invalid: spec.shutdownAfterJobFinishes and spec.deletionStrategy.deletionRules are mutually exclusive"},
		{name: "rules with a TTL but no shutdown", mut: []func(*rayv1.RayJob){sample, func(j *rayv1.RayJob) { j.Spec.TTLSecondsAfterFinished = 10 }},
			want: "a RayJob with shutdownAfterJobFinishes set to false cannot have TTLSecondsAfterFinished"},
		{name: "rules and legacy policies", mut: []func(*rayv1.RayJob){legacy(rayv1.DeleteCluster, rayv1.DeleteCluster),
			func(j *rayv1.RayJob) {
				j.Spec.DeletionStrategy.DeletionRules = []rayv1.DeletionRule{rule(rayv1.DeleteCluster, "FAILED", 0)}
			}},
			want: "Cannot use both legacy onSuccess/onFailure fields and deletionRules simultaneously"},
		{name: "an empty strategy", mut: []func(*rayv1.RayJob){func(j *rayv1.RayJob) { j.Spec.DeletionStrategy = &rayv1.DeletionStrategy{} }},
			want: "DeletionStrategy requires either BOTH onSuccess and onFailure, OR the deletionRules field (cannot be empty)"},
		{name: "only onSuccess", mut: []func(*rayv1.RayJob){legacy(rayv1.DeleteCluster, rayv1.DeleteCluster),
			func(j *rayv1.RayJob) { j.Spec.DeletionStrategy.OnFailure = nil }},
			want: "both DeletionStrategy.OnSuccess and DeletionStrategy.OnFailure must be set"},
		{name: "onFailure without a policy", mut: []func(*rayv1.RayJob){legacy(rayv1.DeleteCluster, rayv1.DeleteCluster),
			func(j *rayv1.RayJob) { j.Spec.DeletionStrategy.OnFailure.Policy = nil }},
			want: "the DeletionPolicyType field of DeletionStrategy.OnFailure cannot be unset"},
		{name: "legacy DeleteWorkers on a selected cluster", mut: []func(*rayv1.RayJob){selector, legacy(rayv1.DeleteNone, rayv1.DeleteWorkers)},
			want: "the ClusterSelector mode doesn't support DeletionStrategy=DeleteWorkers on failure"},
		{name: "legacy DeleteWorkers under the autoscaler", mut: []func(*rayv1.RayJob){autoscaled, legacy(rayv1.DeleteWorkers, rayv1.DeleteCluster)},
			want: "DeletionStrategy=DeleteWorkers currently does not support RayCluster with autoscaling enabled"},
		{name: "legacy DeleteNone with shutdownAfterJobFinishes", mut: []func(*rayv1.RayJob){shutdown, legacy(rayv1.DeleteCluster, rayv1.DeleteNone)},
			want: "shutdownAfterJobFinishes is set to 'true' while deletion policy is 'DeleteNone'"},
		{name: "a condition with both triggers", mut: []func(*rayv1.RayJob){rules(rule(rayv1.DeleteCluster, "FAILED", 0)),
			func(j *rayv1.RayJob) {
				j.Spec.DeletionStrategy.DeletionRules[0].Condition.JobDeploymentStatus = ptr.To(rayv1.JobDeploymentStatusFailed)
			}},
			want: "deletionRules[0]: cannot set both JobStatus and JobDeploymentStatus at the same time"},
		{name: "a condition with no trigger", mut: []func(*rayv1.RayJob){rules(rayv1.DeletionRule{Policy: rayv1.DeleteCluster})},
			want: "deletionRules[0]: exactly one of JobStatus and JobDeploymentStatus must be set"},
		{name: "a negative TTL", mut: []func(*rayv1.RayJob){rules(rule(rayv1.DeleteCluster, "FAILED", -1))},
			want: "deletionRules[0]: TTLSeconds must be non-negative"},
		{name: "DeleteCluster on a selected cluster", mut: []func(*rayv1.RayJob){selector, rules(rule(rayv1.DeleteCluster, "FAILED", 0))},
			want: "deletionRules[0]: DeletionPolicyType 'DeleteCluster' not supported when ClusterSelector is set"},
		{name: "DeleteWorkers under the autoscaler", mut: []func(*rayv1.RayJob){autoscaled, rules(rule(rayv1.DeleteWorkers, "FAILED", 0))},
			want: "deletionRules[0]: DeletionPolicyType 'DeleteWorkers' not supported with autoscaling enabled"},
		{name: "a duplicate rule", mut: []func(*rayv1.RayJob){rules(rule(rayv1.DeleteCluster, "deploy:Failed", 0), rule(rayv1.DeleteCluster, "deploy:Failed", 9))},
			want: "deletionRules[1]: duplicate rule for DeletionPolicyType 'DeleteCluster' and JobDeploymentStatus 'Failed'"},
		{name: "the cluster before its workers", mut: []func(*rayv1.RayJob){rules(rule(rayv1.DeleteWorkers, "SUCCEEDED", 60), rule(rayv1.DeleteCluster, "SUCCEEDED", 30))},
			want: "for JobStatus 'SUCCEEDED': DeleteCluster TTL (30) must be >= DeleteWorkers TTL (60)"},
		{name: "every problem at once, one line each", mut: []func(*rayv1.RayJob){rules(
			rule(rayv1.DeleteCluster, "FAILED", -1),
			rule(rayv1.DeleteSelf, "SUCCEEDED", 10),
			rule(rayv1.DeleteCluster, "SUCCEEDED", 20))},
			want: "deletionRules[0]: TTLSeconds must be non-negative\nfor JobStatus 'SUCCEEDED': DeleteSelf TTL (10) must be >= DeleteCluster TTL (20)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := checkValidate(t, newJob(tc.mut...), tc.want); err != nil && err.(*ValidationError).Reason != EventInvalidSpec {
				t.Fatalf("reason %q, want %q", err.(*ValidationError).Reason, EventInvalidSpec)
			}
		})
	}
}
