package rayparams

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
)

// TestAddAcceleratorResource: a TPU in the limits becomes Ray's TPU resource beside the params' own
// custom resources, as KubeRay adds it; one the params name already is left as given.
func TestAddAcceleratorResource(t *testing.T) {
	tpu := map[string]resource.Quantity{"google.com/tpu": resource.MustParse("4"), "cpu": resource.MustParse("1")}
	params := map[string]string{}
	AddAcceleratorResource(params, tpu)
	if got := params["resources"]; got != `'{"TPU":4}'` {
		t.Errorf("resources = %s", got)
	}
	params = map[string]string{"resources": `'{"custom": 1}'`}
	AddAcceleratorResource(params, tpu)
	if got := params["resources"]; got != `'{"TPU":4,"custom":1}'` {
		t.Errorf("resources beside a custom one = %s", got)
	}
	params = map[string]string{"resources": `'{"TPU": 8}'`}
	AddAcceleratorResource(params, tpu)
	if got := params["resources"]; got != `'{"TPU": 8}'` {
		t.Errorf("resources naming TPU already = %s", got)
	}
	params = map[string]string{}
	AddAcceleratorResource(params, map[string]resource.Quantity{"nvidia.com/gpu": resource.MustParse("1")})
	if _, ok := params["resources"]; ok {
		t.Errorf("a GPU became a custom resource: %v", params)
	}
}
