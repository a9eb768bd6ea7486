package raycluster

import (
	"strings"
	"testing"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"github.com/rayctl/rayctl/pkg/rayparams"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// sampleCluster is a small cluster like configs/samples/raycluster.yaml.
func sampleCluster() *rayv1.RayCluster {
	res := corev1.ResourceRequirements{
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("2Gi")},
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1Gi")},
	}
	return &rayv1.RayCluster{
		TypeMeta:   metav1.TypeMeta{APIVersion: "ray.io/v1", Kind: "RayCluster"},
		ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "ns1", UID: types.UID("uid-1"), Generation: 1},
		Spec: rayv1.RayClusterSpec{
			HeadGroupSpec: rayv1.HeadGroupSpec{
				RayStartParams: map[string]string{},
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "ray-head", Image: "rayctl.local/raysim:latest", Resources: res,
					Ports: []corev1.ContainerPort{
						{Name: "gcs-server", ContainerPort: 6379}, {Name: "dashboard", ContainerPort: 8265}, {Name: "client", ContainerPort: 10001},
					},
				}}}},
			},
			WorkerGroupSpecs: []rayv1.WorkerGroupSpec{{
				GroupName: "small", Replicas: ptr.To[int32](2), MinReplicas: ptr.To[int32](1), MaxReplicas: ptr.To[int32](5),
				RayStartParams: map[string]string{},
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "ray-worker", Image: "rayctl.local/raysim:latest", Resources: res,
				}}}},
			}},
		},
	}
}

func env(c *corev1.Container, name string) (corev1.EnvVar, bool) {
	for _, e := range c.Env {
		if e.Name == name {
			return e, true
		}
	}
	return corev1.EnvVar{}, false
}

func TestHeadPod(t *testing.T) {
	c := sampleCluster()
	before := c.DeepCopy()
	pod := HeadPod(c, BuildOptions{})

	if pod.GenerateName != "demo-head-" || pod.Name != "" || pod.Namespace != "ns1" {
		t.Errorf("name: generateName=%q name=%q ns=%q", pod.GenerateName, pod.Name, pod.Namespace)
	}
	want := map[string]string{
		"ray.io/cluster": "demo", "ray.io/node-type": "head", "ray.io/group": "headgroup", "ray.io/identifier": "demo-head",
		"ray.io/is-ray-node": "yes", "app.kubernetes.io/name": "kuberay", "app.kubernetes.io/created-by": "kuberay-operator",
	}
	for k, v := range want {
		if pod.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, pod.Labels[k], v)
		}
	}
	if pod.Annotations[rayparams.AnnotationFTEnabled] != "false" {
		t.Errorf("ft-enabled annotation: %v", pod.Annotations)
	}
	if len(pod.OwnerReferences) != 1 {
		t.Fatalf("owner refs: %v", pod.OwnerReferences)
	}
	or := pod.OwnerReferences[0]
	if or.Kind != "RayCluster" || or.APIVersion != "ray.io/v1" || or.Name != "demo" || or.UID != "uid-1" || !*or.Controller || !*or.BlockOwnerDeletion {
		t.Errorf("owner ref: %+v", or)
	}

	ray := &pod.Spec.Containers[0]
	if strings.Join(ray.Command, " ") != "/bin/bash -c --" || len(ray.Args) != 1 {
		t.Fatalf("command %q args %q", ray.Command, ray.Args)
	}
	wantCmd := "ulimit -n 65536; ray start --head  --block  --dashboard-agent-listen-port=52365  --dashboard-host=0.0.0.0  --memory=2147483648  --metrics-export-port=8080  --num-cpus=1 "
	if ray.Args[0] != wantCmd {
		t.Errorf("args:\n got %q\nwant %q", ray.Args[0], wantCmd)
	}
	if e, _ := env(ray, "KUBERAY_GEN_RAY_START_CMD"); e.Value != strings.TrimPrefix(wantCmd, "ulimit -n 65536; ") {
		t.Errorf("KUBERAY_GEN_RAY_START_CMD = %q", e.Value)
	}
	for name, value := range map[string]string{
		"RAY_PORT": "6379", "RAY_ADDRESS": "127.0.0.1:6379", "RAY_USAGE_STATS_KUBERAY_IN_USE": "1",
		"RAY_USAGE_STATS_EXTRA_TAGS": "kuberay_version=v1.5.0;kuberay_crd=RayCluster", "RAY_DASHBOARD_ENABLE_K8S_DISK_USAGE": "1",
	} {
		if e, ok := env(ray, name); !ok || e.Value != value {
			t.Errorf("env %s = %q (present %v), want %q", name, e.Value, ok, value)
		}
	}
	for name, path := range map[string]string{
		"RAY_CLUSTER_NAME": "metadata.labels['ray.io/cluster']", "RAY_CLUSTER_NAMESPACE": "metadata.namespace", "RAY_CLOUD_INSTANCE_ID": "metadata.name",
		"RAY_NODE_TYPE_NAME": "metadata.labels['ray.io/group']",
	} {
		if e, ok := env(ray, name); !ok || e.ValueFrom == nil || e.ValueFrom.FieldRef.FieldPath != path {
			t.Errorf("env %s: %+v", name, e)
		}
	}
	if _, ok := env(ray, "FQ_RAY_IP"); ok {
		t.Error("the head got FQ_RAY_IP")
	}
	if len(pod.Spec.InitContainers) != 0 {
		t.Error("the head got an init container")
	}

	// /dev/shm: memory-backed, sized to the memory limit.
	if len(pod.Spec.Volumes) != 1 || pod.Spec.Volumes[0].EmptyDir == nil || pod.Spec.Volumes[0].EmptyDir.Medium != corev1.StorageMediumMemory ||
		pod.Spec.Volumes[0].EmptyDir.SizeLimit.String() != "2Gi" {
		t.Errorf("volumes: %+v", pod.Spec.Volumes)
	}
	if len(ray.VolumeMounts) != 1 || ray.VolumeMounts[0].MountPath != "/dev/shm" {
		t.Errorf("mounts: %+v", ray.VolumeMounts)
	}
	// The metrics port is added to the user's three.
	if len(ray.Ports) != 4 || ray.Ports[3].Name != "metrics" || ray.Ports[3].ContainerPort != 8080 {
		t.Errorf("ports: %+v", ray.Ports)
	}
	// Probes: exec wget of the raylet and the GCS.
	rp := ray.ReadinessProbe
	if rp == nil || rp.Exec == nil || !strings.Contains(rp.Exec.Command[2], "localhost:52365/api/local_raylet_healthz") ||
		!strings.Contains(rp.Exec.Command[2], "localhost:8265/api/gcs_healthz") || rp.PeriodSeconds != 1 || rp.InitialDelaySeconds != 1 || rp.TimeoutSeconds != 5 {
		t.Errorf("readiness probe: %+v", rp)
	}
	if lp := ray.LivenessProbe; lp == nil || lp.InitialDelaySeconds != 30 || lp.FailureThreshold != 120 {
		t.Errorf("liveness probe: %+v", lp)
	}

	if c.Spec.HeadGroupSpec.RayStartParams["block"] != "" || len(c.Spec.HeadGroupSpec.Template.Spec.Containers[0].Ports) != 3 ||
		c.Spec.HeadGroupSpec.Template.Spec.Containers[0].Args != nil || before.Spec.HeadGroupSpec.Template.Labels != nil {
		t.Error("HeadPod modified the cluster")
	}
}

func TestWorkerPod(t *testing.T) {
	c := sampleCluster()
	pod := WorkerPod(c, &c.Spec.WorkerGroupSpecs[0], BuildOptions{})
	if pod.GenerateName != "demo-small-worker-" {
		t.Errorf("generateName %q", pod.GenerateName)
	}
	if pod.Labels["ray.io/node-type"] != "worker" || pod.Labels["ray.io/group"] != "small" || pod.Labels["ray.io/identifier"] != "demo-worker" {
		t.Errorf("labels %v", pod.Labels)
	}
	ray := &pod.Spec.Containers[0]
	wantCmd := "ulimit -n 65536; ray start  --address=demo-head-svc.ns1.svc.cluster.local:6379  --block  --dashboard-agent-listen-port=52365  --memory=2147483648  --metrics-export-port=8080  --num-cpus=1 "
	if ray.Args[0] != wantCmd {
		t.Errorf("args:\n got %q\nwant %q", ray.Args[0], wantCmd)
	}
	for name, value := range map[string]string{
		"FQ_RAY_IP": "demo-head-svc.ns1.svc.cluster.local", "RAY_IP": "demo-head-svc",
		"RAY_ADDRESS": "demo-head-svc.ns1.svc.cluster.local:6379",
	} {
		if e, _ := env(ray, name); e.Value != value {
			t.Errorf("env %s = %q, want %q", name, e.Value, value)
		}
	}
	if _, ok := env(ray, "RAY_USAGE_STATS_EXTRA_TAGS"); ok {
		t.Error("a worker got the head-only usage tags")
	}
	if len(pod.Spec.InitContainers) != 1 {
		t.Fatalf("init containers: %+v", pod.Spec.InitContainers)
	}
	ic := pod.Spec.InitContainers[0]
	if ic.Name != "wait-gcs-ready" || ic.Image != ray.Image || !strings.Contains(ic.Args[0], "ray health-check --address demo-head-svc.ns1.svc.cluster.local:6379") {
		t.Errorf("init container: %+v", ic)
	}
	if e, _ := env(&ic, "FQ_RAY_IP"); e.Value != "demo-head-svc.ns1.svc.cluster.local" {
		t.Errorf("init container FQ_RAY_IP: %+v", ic.Env)
	}
	if rp := ray.ReadinessProbe; rp == nil || strings.Contains(rp.Exec.Command[2], "gcs_healthz") || rp.TimeoutSeconds != 2 {
		t.Errorf("worker readiness probe: %+v", rp)
	}

	if got := WorkerPod(c, &c.Spec.WorkerGroupSpecs[0], BuildOptions{NoInitContainer: true, NoProbes: true}); len(got.Spec.InitContainers) != 0 ||
		got.Spec.Containers[0].ReadinessProbe != nil {
		t.Error("BuildOptions did not turn off the init container and probes")
	}
}

func TestUserCommandAndOverrides(t *testing.T) {
	c := sampleCluster()
	g := &c.Spec.WorkerGroupSpecs[0]
	g.Template.Spec.Containers[0].Command = []string{"echo", "hi"}
	g.RayStartParams = map[string]string{"num-cpus": "3", "log-color": "false", "disable-usage-stats": "false", "resources": `'{"x": 1}'`}
	g.Labels = map[string]string{"zone": "a"}
	g.Template.Labels = map[string]string{"ray.io/group": "spoof", "team": "ml"}
	pod := WorkerPod(c, g, BuildOptions{ClusterDomain: "example.org"})
	args := pod.Spec.Containers[0].Args[0]
	if !strings.HasPrefix(args, " echo  hi  && ulimit -n 65536; ray start ") {
		t.Errorf("user command not first: %q", args)
	}
	for _, want := range []string{"--num-cpus=3 ", "--log-color=false ", "--labels=zone=a ", `--resources='{"x": 1}'`, "--address=demo-head-svc.ns1.svc.example.org:6379"} {
		if !strings.Contains(args, want) {
			t.Errorf("args lack %q: %q", want, args)
		}
	}
	if strings.Contains(args, "disable-usage-stats") {
		t.Errorf("a false flag was passed: %q", args)
	}
	if pod.Labels["ray.io/group"] != "small" || pod.Labels["team"] != "ml" || pod.Labels["zone"] != "a" {
		t.Errorf("labels: %v", pod.Labels)
	}

	c.Annotations = map[string]string{rayparams.AnnotationOverwriteCmd: "true"}
	pod = WorkerPod(c, g, BuildOptions{})
	if got := pod.Spec.Containers[0]; len(got.Args) != 0 || strings.Join(got.Command, " ") != "echo hi" {
		t.Errorf("overwrite-container-cmd: command %q args %q", got.Command, got.Args)
	}
}

func TestHeadService(t *testing.T) {
	c := sampleCluster()
	svc := HeadService(c)
	if svc.Name != "demo-head-svc" || svc.Namespace != "ns1" {
		t.Errorf("name %s/%s", svc.Namespace, svc.Name)
	}
	if svc.Spec.ClusterIP != corev1.ClusterIPNone || !svc.Spec.PublishNotReadyAddresses {
		t.Errorf("not headless: %+v", svc.Spec)
	}
	var names []string
	for _, p := range svc.Spec.Ports {
		names = append(names, p.Name)
		if *p.AppProtocol != "tcp" {
			t.Errorf("port %s appProtocol %v", p.Name, p.AppProtocol)
		}
	}
	if strings.Join(names, ",") != "client,dashboard,gcs-server,metrics" {
		t.Errorf("ports %v", names)
	}
	sel := svc.Spec.Selector
	if sel["ray.io/cluster"] != "demo" || sel["ray.io/node-type"] != "head" || sel["ray.io/identifier"] != "demo-head" || len(sel) != 5 {
		t.Errorf("selector %v", sel)
	}
	// The selector selects the head Pod.
	head := HeadPod(c, BuildOptions{})
	for k, v := range sel {
		if head.Labels[k] != v {
			t.Errorf("selector %s=%s misses the head pod (%q)", k, v, head.Labels[k])
		}
	}

	c.Spec.HeadGroupSpec.Template.Spec.Containers[0].Ports = nil
	c.Spec.HeadGroupSpec.ServiceType = corev1.ServiceTypeNodePort
	svc = HeadService(c)
	names = nil
	for _, p := range svc.Spec.Ports {
		names = append(names, p.Name)
	}
	if strings.Join(names, ",") != "client,dashboard,gcs-server,metrics,serve" || svc.Spec.ClusterIP != "" || svc.Spec.Type != corev1.ServiceTypeNodePort {
		t.Errorf("default ports / NodePort: %v %+v", names, svc.Spec)
	}
}

func TestDesiredWorkers(t *testing.T) {
	i := func(v int32) *int32 { return &v }
	for _, tc := range []struct {
		name             string
		replicas, lo, hi *int32
		hosts            int32
		suspend          bool
		want             int32
	}{
		{"within", i(3), i(1), i(5), 1, false, 3},
		{"below min", i(0), i(2), i(5), 1, false, 2},
		{"above max", i(9), i(1), i(5), 1, false, 5},
		{"nil replicas", nil, i(2), i(5), 1, false, 2},
		{"min above max", i(3), i(6), i(4), 1, false, 4},
		{"nil bounds", i(7), nil, nil, 0, false, 7},
		{"hosts", i(2), i(0), i(5), 2, false, 4},
		{"suspended", i(3), i(1), i(5), 1, true, 0},
	} {
		g := &rayv1.WorkerGroupSpec{Replicas: tc.replicas, MinReplicas: tc.lo, MaxReplicas: tc.hi, NumOfHosts: tc.hosts, Suspend: &tc.suspend}
		if got := DesiredWorkers(g); got != tc.want {
			t.Errorf("%s: got %d want %d", tc.name, got, tc.want)
		}
	}
}

func TestShouldDelete(t *testing.T) {
	pod := func(phase corev1.PodPhase, policy corev1.RestartPolicy, terminated bool) *corev1.Pod {
		p := &corev1.Pod{Spec: corev1.PodSpec{RestartPolicy: policy, Containers: []corev1.Container{{Name: "ray"}, {Name: "side"}}}}
		p.Status.Phase = phase
		st := corev1.ContainerStatus{Name: "ray"}
		if terminated {
			st.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: 1}
		}
		// The sidecar's status comes first: matching must go by name.
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "side"}, st}
		return p
	}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"failed", pod(corev1.PodFailed, corev1.RestartPolicyAlways, false), true},
		{"succeeded", pod(corev1.PodSucceeded, corev1.RestartPolicyAlways, false), true},
		{"running", pod(corev1.PodRunning, corev1.RestartPolicyNever, false), false},
		{"ray exited, never restarts", pod(corev1.PodRunning, corev1.RestartPolicyNever, true), true},
		{"ray exited, restarts", pod(corev1.PodRunning, corev1.RestartPolicyAlways, true), false},
		{"pending", pod(corev1.PodPending, corev1.RestartPolicyNever, false), false},
	} {
		if got, _ := shouldDelete(tc.pod, rayv1.WorkerNode); got != tc.want {
			t.Errorf("%s: got %v want %v", tc.name, got, tc.want)
		}
	}
}

func TestScaleDownOrder(t *testing.T) {
	ready := corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	at := func(s int64) metav1.Time { return metav1.Unix(s, 0) }
	pods := []corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "old-ready", CreationTimestamp: at(1)}, Status: ready},
		{ObjectMeta: metav1.ObjectMeta{Name: "pending", CreationTimestamp: at(1)}},
		{ObjectMeta: metav1.ObjectMeta{Name: "new-ready", CreationTimestamp: at(5)}, Status: ready},
	}
	scaleDownOrder(pods)
	if pods[0].Name != "pending" || pods[1].Name != "new-ready" || pods[2].Name != "old-ready" {
		t.Errorf("order: %s %s %s", pods[0].Name, pods[1].Name, pods[2].Name)
	}
}

// TestKubeRaySwitchesFromTheEnvironment: ENABLE_INIT_CONTAINER_INJECTION and ENABLE_PROBES_INJECTION
// turn the injections off only when "false" (any case), as KubeRay's operator reads them.
func TestKubeRaySwitchesFromTheEnvironment(t *testing.T) {
	for env, want := range map[string]BuildOptions{
		"":      {},
		"true":  {},
		"no":    {},
		"false": {NoInitContainer: true, NoProbes: true},
		"FALSE": {NoInitContainer: true, NoProbes: true},
	} {
		got := buildOptionsFromEnv(func(string) string { return env })
		if got.NoInitContainer != want.NoInitContainer || got.NoProbes != want.NoProbes {
			t.Errorf("%q: %+v, want %+v", env, got, want)
		}
	}
	only := buildOptionsFromEnv(func(k string) string {
		if k == "ENABLE_INIT_CONTAINER_INJECTION" {
			return "False"
		}
		return ""
	})
	if !only.NoInitContainer || only.NoProbes {
		t.Errorf("only the init container switch: %+v", only)
	}
}
