package raycluster

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/rayctl/rayctl/pkg/rayparams"
	"github.com/rayctl/rayctl/pkg/rayports"
)

// TestPodsOnHostPorts builds a head and a worker as the controller does where pods share the host's
// network: each Ray listens on its own block of the host's loopback, the worker joins the head's GCS
// there, and what reads the Pod (probes, ports, environment) follows.
func TestPodsOnHostPorts(t *testing.T) {
	c := sampleCluster()
	c.Spec.HeadGroupSpec.RayStartParams["dashboard-host"] = "0.0.0.0" // as KubeRay's samples set it
	const head, own = rayports.Block(20040), rayports.Block(20070)

	hp := HeadPod(c, BuildOptions{Ports: &PortPlan{Own: head, Head: head}})
	ray := &hp.Spec.Containers[0]
	cmd := strings.Join(ray.Args, " ")
	for _, flag := range []string{"--port=20040 ", "--dashboard-port=20041 ", "--ray-client-server-port=20042 ", "--metrics-export-port=20043 ",
		"--dashboard-agent-listen-port=20044 ", "--node-ip-address=127.0.0.1 ", "--dashboard-host=127.0.0.1 ", "--min-worker-port=0 "} {
		if !strings.Contains(cmd, flag) {
			t.Errorf("head's ray start lacks %s: %s", flag, cmd)
		}
	}
	if strings.Contains(cmd, "0.0.0.0") {
		t.Errorf("the head's Ray listens on every address: %s", cmd)
	}
	ports := map[string]int32{}
	for _, p := range ray.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if ports["gcs-server"] != 20040 || ports["dashboard"] != 20041 || ports["client"] != 20042 || ports["metrics"] != 20043 {
		t.Errorf("head container ports %v", ports)
	}
	if hp.Annotations[rayports.Annotation] != "20040" {
		t.Errorf("head's block not recorded: %v", hp.Annotations)
	}
	if probe := strings.Join(ray.ReadinessProbe.Exec.Command, " "); !strings.Contains(probe, "localhost:20044/") || !strings.Contains(probe, "localhost:20041/") {
		t.Errorf("head's probe misses its ports: %s", probe)
	}

	wp := WorkerPod(c, &c.Spec.WorkerGroupSpecs[0], BuildOptions{Ports: &PortPlan{Own: own, Head: head}})
	w := &wp.Spec.Containers[0]
	wcmd := strings.Join(w.Args, " ")
	if !strings.Contains(wcmd, "--address=127.0.0.1:20040 ") || !strings.Contains(wcmd, "--metrics-export-port=20073 ") || !strings.Contains(wcmd, "--node-manager-port=20076 ") {
		t.Errorf("worker's ray start: %s", wcmd)
	}
	if v, _ := env(w, "RAY_ADDRESS"); v.Value != "127.0.0.1:20040" {
		t.Errorf("worker's RAY_ADDRESS %q", v.Value)
	}
	if v, _ := env(w, "RAY_IP"); v.Value != "127.0.0.1" {
		t.Errorf("worker's RAY_IP %q", v.Value)
	}
	if init := strings.Join(wp.Spec.InitContainers[0].Args, " "); !strings.Contains(init, "--address 127.0.0.1:20040") {
		t.Errorf("worker's GCS wait: %s", init)
	}
	for _, p := range w.Ports {
		if p.Name == rayparams.MetricsPortName && p.ContainerPort != 20073 {
			t.Errorf("worker's metrics port %d", p.ContainerPort)
		}
	}

	// Without a plan nothing changes.
	if cmd := strings.Join(HeadPod(c, BuildOptions{}).Spec.Containers[0].Args, " "); strings.Contains(cmd, "2004") || !strings.Contains(cmd, "--dashboard-host=0.0.0.0") {
		t.Errorf("a head without a plan: %s", cmd)
	}
}

// TestHeadServiceOnHostPorts: the head Service keeps its ports and targets the head's block, and has a
// cluster IP, so that `kubectl port-forward svc/… 8265` reaches the head's dashboard.
func TestHeadServiceOnHostPorts(t *testing.T) {
	c := sampleCluster()
	svc := HeadService(c)
	placeServicePorts(svc, c, 20100)
	if svc.Spec.ClusterIP == corev1.ClusterIPNone {
		t.Error("the head Service stays headless: kubectl port-forward would skip its target ports")
	}
	for _, p := range svc.Spec.Ports {
		want := map[string]int32{"client": 20102, "dashboard": 20101, "gcs-server": 20100, "metrics": 20103}[p.Name]
		if p.TargetPort.IntVal != want {
			t.Errorf("port %s (%d) targets %s, want %d", p.Name, p.Port, p.TargetPort.String(), want)
		}
	}
	if b, ok := rayports.FromAnnotations(svc.Annotations); !ok || b != 20100 {
		t.Errorf("block not recorded: %v", svc.Annotations)
	}
}
