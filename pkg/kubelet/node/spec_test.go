package node

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestSpecs: rayctl up's --node, --node-labels and --node-taints become each node's capacity, labels
// and taints; a bad value is refused naming its flag.
func TestSpecs(t *testing.T) {
	specs, err := Specs("main", nil, []string{"gpu1:cpu=4,memory=16Gi,nvidia.com/gpu=1", "plain"},
		[]string{"gpu1:accelerator=a100,zone=a", "main:role=head"}, []string{"gpu1:nvidia.com/gpu=present:NoSchedule,spot:PreferNoSchedule"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) != 3 || specs[0].Name != "main" || specs[1].Name != "gpu1" || specs[2].Name != "plain" {
		t.Fatalf("specs = %+v", specs)
	}
	g := specs[1]
	if q := g.Capacity["nvidia.com/gpu"]; q.Value() != 1 || g.Labels["accelerator"] != "a100" || g.Labels["zone"] != "a" {
		t.Errorf("gpu1 = %+v", g)
	}
	want := []corev1.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}, {Key: "spot", Effect: corev1.TaintEffectPreferNoSchedule}}
	if len(g.Taints) != 2 || g.Taints[0] != want[0] || g.Taints[1] != want[1] {
		t.Errorf("gpu1 taints = %+v", g.Taints)
	}
	if specs[0].Labels["role"] != "head" || len(specs[2].Capacity) != 0 {
		t.Errorf("main = %+v, plain = %+v", specs[0], specs[2])
	}
	for _, c := range []struct {
		nodes, labels, taints []string
		want                  string
	}{
		{nodes: []string{"main"}, want: `--node "main": node "main" is given twice`},
		{nodes: []string{"Bad_Name"}, want: `is not a node name`},
		{nodes: []string{"g:nvidia.com/gpu"}, want: `want resource=quantity`},
		{nodes: []string{"g:cpu=lots"}, want: `--node "g:cpu=lots"`},
		{labels: []string{"nope:a=b"}, want: `--node-labels "nope:a=b": no node "nope" (the nodes are main)`},
		{labels: []string{"main:a=b=c"}, want: `--node-labels "main:a=b=c"`},
		{taints: []string{"main:k=v:Sometimes"}, want: `effect "Sometimes" is none of NoSchedule, PreferNoSchedule, NoExecute`},
		{taints: []string{"main:k=v"}, want: `want key=value:Effect or key:Effect`},
	} {
		if _, err := Specs("main", nil, c.nodes, c.labels, c.taints, ""); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error containing %q", c, err, c.want)
		}
	}
}

// TestSimulatedSpecs: --simulated-nodes 3:cpu=32 makes sim-001…sim-003, labelled simulated, which
// --node-taints can name.
func TestSimulatedSpecs(t *testing.T) {
	specs, err := Specs("main", nil, nil, nil, []string{"sim-002:kwok=fake:NoSchedule"}, "3:cpu=32,pods=110")
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) != 4 || specs[1].Name != "sim-001" || specs[3].Name != "sim-003" || !specs[2].Simulated || specs[0].Simulated {
		t.Fatalf("specs = %+v", specs)
	}
	if q := specs[3].Capacity[corev1.ResourceCPU]; q.Value() != 32 || specs[3].Labels[SimulatedLabel] != "true" || len(specs[2].Taints) != 1 {
		t.Errorf("sim nodes = %+v", specs[1:])
	}
	for in, want := range map[string]string{"lots": "want COUNT", "-1": "want COUNT", "2:cpu": "want resource=quantity", "9999": "0 to 5000"} {
		if _, err := Specs("main", nil, nil, nil, nil, in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("--simulated-nodes %s: %v, want %q", in, err, want)
		}
	}
}
