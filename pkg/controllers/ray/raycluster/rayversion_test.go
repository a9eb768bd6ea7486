package raycluster

import (
	"strings"
	"testing"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	"github.com/rayctl/rayctl/pkg/controllers/chainhooks"
	"github.com/rayctl/rayctl/pkg/controllers/ctrlset"
)

// TestRayVersionWarning: a head pod whose Ray image the host's Ray runs is announced with a Warning
// when spec.rayVersion names another version; the same version, raysim's image, or no host Ray says
// nothing.
func TestRayVersionWarning(t *testing.T) {
	hostRay := func(image string) string {
		if strings.Contains(image, "rayproject/ray") {
			return "2.60.0"
		}
		return ""
	}
	for _, tc := range []struct {
		name, version, image string
		hostRay              func(string) string
		want                 string
	}{
		{"older spec", "2.46.0", "rayproject/ray:2.46.0", hostRay,
			"Warning RayVersionMismatch spec.rayVersion is 2.46.0, but the host's Ray 2.60.0 runs image rayproject/ray:2.46.0 on this node"},
		{"same version", "2.60.0", "rayproject/ray:2.60.0", hostRay, ""},
		{"raysim", "2.46.0", "rayctl.local/raysim:latest", hostRay, ""},
		{"no host Ray", "2.46.0", "rayproject/ray:2.46.0", nil, ""},
		{"no rayVersion", "", "rayproject/ray:2.46.0", hostRay, ""},
	} {
		rec := record.NewFakeRecorder(4)
		r := newReconciler(nil, ctrlset.Env{Recorder: rec, Hooks: chainhooks.New(Name, nil), HostRayVersion: tc.hostRay}, BuildOptions{})
		c := &rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}, Spec: rayv1.RayClusterSpec{RayVersion: tc.version}}
		head := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "ray-head", Image: tc.image}}}}
		r.warnRayVersion(c, head)
		got := ""
		select {
		case got = <-rec.Events:
		default:
		}
		if got != tc.want {
			t.Errorf("%s: event %q, want %q", tc.name, got, tc.want)
		}
	}
}
