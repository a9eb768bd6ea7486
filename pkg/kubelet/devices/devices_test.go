package devices

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func gpus(n string) corev1.ResourceList {
	return corev1.ResourceList{"nvidia.com/gpu": resource.MustParse(n), corev1.ResourceCPU: resource.MustParse("1")}
}

func env(a Allocation, name string) string {
	for _, e := range a.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// TestAllocate: containers get distinct devices of the node's, keep theirs across restarts, get them
// back once a pod is released, and are refused beyond the node's count.
func TestAllocate(t *testing.T) {
	m := New(gpus("3"))
	a, err := m.Allocate("p1", "ray", gpus("2"))
	if err != nil || env(a, "CUDA_VISIBLE_DEVICES") != "0,1" || env(a, "NVIDIA_VISIBLE_DEVICES") != "0,1" {
		t.Fatalf("p1: %+v, %v", a, err)
	}
	if again, _ := m.Allocate("p1", "ray", gpus("2")); env(again, "CUDA_VISIBLE_DEVICES") != "0,1" {
		t.Errorf("restart got %+v", again)
	}
	b, err := m.Allocate("p2", "ray", gpus("1"))
	if err != nil || env(b, "CUDA_VISIBLE_DEVICES") != "2" {
		t.Fatalf("p2: %+v, %v", b, err)
	}
	if _, err := m.Allocate("p3", "ray", gpus("1")); err == nil || !strings.Contains(err.Error(), "1 nvidia.com/gpu asked for, 0 of the node's 3 free") {
		t.Errorf("p3 beyond the node: %v", err)
	}
	m.Release("p1")
	if c, err := m.Allocate("p3", "ray", gpus("2")); err != nil || env(c, "CUDA_VISIBLE_DEVICES") != "0,1" {
		t.Errorf("p3 after p1 left: %+v, %v", c, err)
	}
	if none, err := m.Allocate("p4", "c", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}); err != nil || len(none.Env) != 0 {
		t.Errorf("a container asking for no device: %+v, %v", none, err)
	}
}

// TestMissing: a TPU this machine lacks is named in the allocation, with the variable set regardless.
func TestMissing(t *testing.T) {
	m := New(corev1.ResourceList{"google.com/tpu": resource.MustParse("4")})
	a, err := m.Allocate("p", "c", corev1.ResourceList{"google.com/tpu": resource.MustParse("4")})
	if err != nil || env(a, "TPU_VISIBLE_CHIPS") != "0,1,2,3" {
		t.Fatalf("%+v, %v", a, err)
	}
	if len(a.Missing) != 4 || a.Missing[0] != "google.com/tpu 0" {
		t.Errorf("missing = %q", a.Missing)
	}
}
