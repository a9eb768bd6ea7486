package autoscaler

import (
	"reflect"
	"testing"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	rayres "github.com/rayctl/rayctl/pkg/raysim/resource"
)

func TestShape(t *testing.T) {
	group := func(params map[string]string, top map[string]string, res corev1.ResourceRequirements) *rayv1.WorkerGroupSpec {
		return &rayv1.WorkerGroupSpec{RayStartParams: params, Resources: top,
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Resources: res}}}}}
	}
	q := resource.MustParse
	cases := []struct {
		name string
		g    *rayv1.WorkerGroupSpec
		want rayres.Set
	}{
		{"limits", group(nil, nil, corev1.ResourceRequirements{Limits: corev1.ResourceList{"cpu": q("2"), "memory": q("1Gi"), "nvidia.com/gpu": q("1")}}),
			rayres.Set{"CPU": 2, "memory": 1 << 30, "GPU": 1}},
		{"requests when no limits (CPU rounded up as KubeRay does)", group(nil, nil, corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": q("500m")}}),
			rayres.Set{"CPU": 1}},
		{"rayStartParams win", group(map[string]string{"num-cpus": "3", "resources": `'{"Custom": 2}'`}, nil,
			corev1.ResourceRequirements{Limits: corev1.ResourceList{"cpu": q("1")}}), rayres.Set{"CPU": 3, "Custom": 2}},
		{"escaped JSON resources", group(map[string]string{"num-cpus": "0", "resources": `"{\"TPU\": 4}"`}, nil, corev1.ResourceRequirements{}),
			rayres.Set{"CPU": 0, "TPU": 4}},
		{"top-level resources", group(nil, map[string]string{"CPU": "4", "accel": "2"}, corev1.ResourceRequirements{Limits: corev1.ResourceList{"cpu": q("1")}}),
			rayres.Set{"CPU": 4, "accel": 2}},
	}
	for _, tc := range cases {
		if got := Shape(tc.g); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: Shape = %v, want %v", tc.name, got, tc.want)
		}
	}
}
