package raycluster

import (
	"strings"
	"testing"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

func mounts(c *corev1.Container, path string) bool {
	for _, m := range c.VolumeMounts {
		if m.MountPath == path {
			return true
		}
	}
	return false
}

func TestAutoscalerSidecar(t *testing.T) {
	c := sampleCluster()
	c.Spec.EnableInTreeAutoscaling = ptr.To(true)
	pod := HeadPod(c, BuildOptions{})
	if len(pod.Spec.Containers) != 2 || pod.Spec.Containers[1].Name != AutoscalerContainerName {
		t.Fatalf("containers: %+v", pod.Spec.Containers)
	}
	ray, as := &pod.Spec.Containers[0], &pod.Spec.Containers[1]
	if !strings.Contains(ray.Args[0], " --no-monitor ") {
		t.Errorf("ray start lacks --no-monitor: %s", ray.Args[0])
	}
	if pod.Spec.ServiceAccountName != "demo" {
		t.Errorf("serviceAccountName = %q, want the cluster's name", pod.Spec.ServiceAccountName)
	}
	if as.Image != ray.Image || as.ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("autoscaler image %q (%s), want the head's %q", as.Image, as.ImagePullPolicy, ray.Image)
	}
	if got := strings.Join(append(as.Command, as.Args...), " "); !strings.Contains(got, "ray kuberay-autoscaler --cluster-name $(RAY_CLUSTER_NAME) --cluster-namespace $(RAY_CLUSTER_NAMESPACE)") {
		t.Errorf("autoscaler command: %s", got)
	}
	for name, want := range map[string]string{"RAY_CLUSTER_NAME": "metadata.labels['ray.io/cluster']", "RAY_CLUSTER_NAMESPACE": "metadata.namespace", "RAY_HEAD_POD_NAME": "metadata.name"} {
		if e, ok := env(as, name); !ok || e.ValueFrom == nil || e.ValueFrom.FieldRef.FieldPath != want {
			t.Errorf("env %s = %+v, want fieldRef %s", name, e, want)
		}
	}
	if e, _ := env(as, "KUBERAY_CRD_VER"); e.Value != "v1" {
		t.Errorf("KUBERAY_CRD_VER = %q", e.Value)
	}
	if q := as.Resources.Limits[corev1.ResourceCPU]; q.String() != "500m" {
		t.Errorf("autoscaler CPU limit %s, want 500m", q.String())
	}
	if !mounts(ray, "/tmp/ray") || !mounts(as, "/tmp/ray") {
		t.Errorf("ray-logs volume not shared: ray %+v, autoscaler %+v", ray.VolumeMounts, as.VolumeMounts)
	}
	if _, ok := env(ray, EnvAutoscalerV2); ok || pod.Spec.RestartPolicy == corev1.RestartPolicyNever {
		t.Errorf("v1 autoscaler got v2's settings")
	}

	// autoscalerOptions override the sidecar; version v2 sets Ray's v2 switch and restartPolicy Never.
	c.Spec.HeadGroupSpec.Template.Spec.ServiceAccountName = "mine"
	cpu := resource.MustParse("200m")
	c.Spec.AutoscalerOptions = &rayv1.AutoscalerOptions{
		Image: ptr.To("other:1"), ImagePullPolicy: ptr.To(corev1.PullAlways),
		Resources:       &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: cpu}},
		Env:             []corev1.EnvVar{{Name: "X", Value: "1"}},
		EnvFrom:         []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}}},
		VolumeMounts:    []corev1.VolumeMount{{Name: "v", MountPath: "/v"}},
		SecurityContext: &corev1.SecurityContext{RunAsNonRoot: ptr.To(true)},
		Version:         ptr.To(rayv1.AutoscalerVersionV2),
	}
	pod = HeadPod(c, BuildOptions{})
	ray, as = &pod.Spec.Containers[0], &pod.Spec.Containers[1]
	if pod.Spec.ServiceAccountName != "mine" || as.Image != "other:1" || as.ImagePullPolicy != corev1.PullAlways ||
		as.Resources.Limits.Cpu().String() != "200m" || len(as.EnvFrom) != 1 || !mounts(as, "/v") ||
		as.SecurityContext == nil || !*as.SecurityContext.RunAsNonRoot {
		t.Errorf("autoscalerOptions not applied: sa=%q %+v", pod.Spec.ServiceAccountName, as)
	}
	if e, _ := env(as, "X"); e.Value != "1" {
		t.Errorf("autoscalerOptions.env not applied: %+v", as.Env)
	}
	if e, _ := env(ray, EnvAutoscalerV2); e.Value != "true" || pod.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("v2: env %+v restartPolicy %q", e, pod.Spec.RestartPolicy)
	}
	if w := WorkerPod(c, &c.Spec.WorkerGroupSpecs[0], BuildOptions{}); w.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("v2 worker restartPolicy %q, want Never", w.Spec.RestartPolicy)
	}

	// Without autoscaling nothing of this appears.
	c.Spec.EnableInTreeAutoscaling = nil
	pod = HeadPod(c, BuildOptions{})
	if len(pod.Spec.Containers) != 1 || strings.Contains(pod.Spec.Containers[0].Args[0], "no-monitor") || mounts(&pod.Spec.Containers[0], "/tmp/ray") {
		t.Errorf("autoscaler parts without enableInTreeAutoscaling: %+v", pod.Spec)
	}
}

func TestAutoscalerRBAC(t *testing.T) {
	c := sampleCluster()
	role, rb := AutoscalerRole(c), AutoscalerRoleBinding(c)
	if role.Name != "demo" || rb.Name != "demo" || rb.RoleRef.Name != "demo" || rb.Subjects[0].Name != "demo" || rb.Subjects[0].Namespace != "ns1" {
		t.Errorf("names: role %s, binding %s → %s for %+v", role.Name, rb.Name, rb.RoleRef.Name, rb.Subjects)
	}
	if len(role.OwnerReferences) != 1 || role.OwnerReferences[0].Name != "demo" || !*role.OwnerReferences[0].Controller {
		t.Errorf("role not owned by the cluster: %+v", role.OwnerReferences)
	}
	long := strings.Repeat("a", 52) + "1"
	if got := checkName(long); len(got) != 50 {
		t.Errorf("checkName(%q) = %q", long, got)
	}
	if got := checkName("1abc"); got != "rabc" {
		t.Errorf("checkName(1abc) = %q", got)
	}
}
