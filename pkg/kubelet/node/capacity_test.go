package node

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestParseCapacity: `--node-capacity cpu=8,memory=16Gi` becomes the Node's capacity overrides; a name
// or quantity that is none is refused naming it.
func TestParseCapacity(t *testing.T) {
	got, err := ParseCapacity(map[string]string{"cpu": "8", "memory": "16Gi", "nvidia.com/gpu": "1"})
	if err != nil {
		t.Fatal(err)
	}
	if c := got[corev1.ResourceCPU]; c.Cmp(resource.MustParse("8")) != 0 {
		t.Errorf("cpu = %s", c.String())
	}
	if m := got[corev1.ResourceMemory]; m.Cmp(resource.MustParse("16Gi")) != 0 {
		t.Errorf("memory = %s", m.String())
	}
	if g := got["nvidia.com/gpu"]; g.Value() != 1 {
		t.Errorf("nvidia.com/gpu = %s", g.String())
	}
	for in, want := range map[string]string{
		"cpu=eight":  "cpu=eight: quantities must match",
		"cpu=-2":     "cannot be negative",
		"c p u=2":    `"c p u" is not a resource name`,
		"memory=1Qi": "memory=1Qi:",
	} {
		k, v, _ := strings.Cut(in, "=")
		if _, err := ParseCapacity(map[string]string{k: v}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error containing %q", in, err, want)
		}
	}
}

// TestOvercommits names what is advertised beyond the host, and only that.
func TestOvercommits(t *testing.T) {
	host := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("24Gi")}
	got := Overcommits(host, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("16Gi")})
	if len(got) != 1 || got[0] != "cpu 8 (the host has 2)" {
		t.Errorf("Overcommits = %q", got)
	}
}
