package pod

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

func TestPodPort(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{
		{Name: "sidecar"},
		{Name: "ray-head", Ports: []corev1.ContainerPort{{Name: "gcs-server", ContainerPort: 6379}, {Name: "dashboard", ContainerPort: 8265}}},
	}}}
	for _, tc := range []struct{ in, want string }{
		{"", "6379"}, {"8265", "8265"}, {"dashboard", "8265"}, {"9999", "9999"},
	} {
		if got, err := podPort(pod, tc.in); err != nil || got != tc.want {
			t.Errorf("podPort(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"nope", "0", "70000"} {
		if _, err := podPort(pod, in); !apierrors.IsBadRequest(err) {
			t.Errorf("podPort(%q): %v, want a 400", in, err)
		}
	}
	if got, err := podPort(&corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}}, ""); err != nil || got != "" {
		t.Errorf("podPort of a pod without ports = %q, %v; want none", got, err)
	}
}
