package validation

import (
	"strings"
	"testing"

	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestRuntimeClass: a handler is required and is a DNS label, and it cannot change.
func TestRuntimeClass(t *testing.T) {
	rc := func(name, handler string) *nodev1.RuntimeClass {
		return &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "1"}, Handler: handler}
	}
	if errs := ValidateRuntimeClass(rc("containerd", "containerd")); len(errs) != 0 {
		t.Errorf("a valid class: %v", errs)
	}
	for _, tc := range []struct {
		rc   *nodev1.RuntimeClass
		want string
	}{
		{rc("none", ""), "handler: Required value"},
		{rc("bad", "Run_C"), "handler: Invalid value"},
		{rc("Bad_Name", "runc"), "metadata.name: Invalid value"},
	} {
		if errs := ValidateRuntimeClass(tc.rc); !strings.Contains(errs.ToAggregate().Error(), tc.want) {
			t.Errorf("%s/%s: %v, want %q", tc.rc.Name, tc.rc.Handler, errs, tc.want)
		}
	}
	if errs := ValidateRuntimeClassUpdate(rc("c", "runsc"), rc("c", "runc")); !strings.Contains(errs.ToAggregate().Error(), "handler: Invalid value") {
		t.Errorf("a changed handler: %v", errs)
	}
}
