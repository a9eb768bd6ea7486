package rayparams

import (
	"testing"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestHeadServiceNames: the RayCluster controller names the head Service from the spec alone, while a
// caller with a live cluster takes the name its status reports, falling back to that rule.
func TestHeadServiceNames(t *testing.T) {
	c := &rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo"}}
	if got := HeadServiceName(c); got != "demo-head-svc" {
		t.Errorf("HeadServiceName = %q, want demo-head-svc", got)
	}
	c.Spec.HeadGroupSpec.HeadService = &corev1.Service{}
	c.Spec.HeadGroupSpec.HeadService.Name = "mine"
	if got := CurrentHeadServiceName(c); got != "mine" {
		t.Errorf("CurrentHeadServiceName without status = %q, want mine", got)
	}
	c.Status.Head.ServiceName = "reported"
	if got, want := [2]string{HeadServiceName(c), CurrentHeadServiceName(c)}, [2]string{"mine", "reported"}; got != want {
		t.Errorf("HeadServiceName, CurrentHeadServiceName = %q, want %q", got, want)
	}
}
