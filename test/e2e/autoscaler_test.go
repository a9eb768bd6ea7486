package e2e

// The in-tree autoscaler end to end, on raysim: the head Pod's `ray kuberay-autoscaler` sidecar reaches
// the API server with its ServiceAccount's token, sees a job waiting for more CPUs than the head has,
// patches the worker group up; the controller makes the worker, the job runs on it; once the worker has
// been idle for idleTimeoutSeconds the sidecar names it in workersToDelete and the group returns to its
// minimum. `rayctl trace` links the sidecar's patch to the Reconcile that created the worker Pod.

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/rayctl/rayctl/pkg/chain"
	"github.com/rayctl/rayctl/pkg/raysim/jobs"
	"github.com/rayctl/rayctl/test/e2e/framework"
)

// autoscalingCluster is a raysim cluster whose head declares 1 CPU, with one group of 2-CPU workers
// from 0 to 3, the in-tree autoscaler on, workers idle for 5 s going, a pass every second.
func autoscalingCluster(name string) *rayv1.RayCluster {
	small := corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")}}
	container := func(n string) corev1.Container {
		return corev1.Container{Name: n, Image: "rayctl.local/raysim:latest", Resources: small}
	}
	return &rayv1.RayCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: rayv1.RayClusterSpec{
			EnableInTreeAutoscaling: ptr.To(true),
			AutoscalerOptions: &rayv1.AutoscalerOptions{
				IdleTimeoutSeconds: ptr.To[int32](5),
				UpscalingMode:      ptr.To(rayv1.UpscalingMode("Default")),
				Resources:          &small,
				Env:                []corev1.EnvVar{{Name: "AUTOSCALER_UPDATE_INTERVAL_S", Value: "1"}},
			},
			HeadGroupSpec: rayv1.HeadGroupSpec{
				RayStartParams: map[string]string{"num-cpus": "1"},
				Template:       corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{container("ray-head")}}},
			},
			WorkerGroupSpecs: []rayv1.WorkerGroupSpec{{
				GroupName: "cpu", Replicas: ptr.To[int32](0), MinReplicas: ptr.To[int32](0), MaxReplicas: ptr.To[int32](3),
				RayStartParams: map[string]string{"num-cpus": "2"},
				Template:       corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{container("ray-worker")}}},
			}},
		},
	}
}

func TestAutoscaler(t *testing.T) {
	t.Parallel()
	in, err := framework.Start("", "--ray", "sim")
	if err != nil {
		t.Fatalf("starting rayctl: %v", err)
	}
	t.Cleanup(func() { in.Cleanup(t) })
	e := newRayEnv(t, in)
	// The sidecar needs what in-cluster clients need (issue 13 §3): the kubernetes Service, the
	// KUBERNETES_SERVICE_* environment and a ServiceAccount token in the Pod.
	if _, _, err := in.Kubectl(e.ctx, "", "get", "service", "kubernetes", "-n", "default"); err != nil {
		t.Skip("pods cannot reach the API server in-cluster on this build (no kubernetes Service): the autoscaler sidecar cannot run")
	}
	worker, logs := e.autoscales(t, autoscalingCluster("asc"), 2, true, rayTimeout)
	for _, line := range []string{"adding 1 worker(s) of cpu for pending demands: replicas 0 -> 1",
		"removing 1 idle worker(s) of cpu: [" + worker + "]", "workersToDelete [" + worker + "]"} {
		if !strings.Contains(logs, line) {
			t.Errorf("the autoscaler's log lacks %q:\n%s", line, logs)
		}
	}
}

// autoscales runs the scenario on cluster c, whose head lacks the CPUs a job asking for cpus has and
// whose first worker group, from 0 replicas, has them: the job is submitted to the head's dashboard,
// the group goes up to 1, the job succeeds, the worker Pod's trace starts at the sidecar's patch, and the
// idle worker goes (replicas 0, and with clears workersToDelete emptied once the Pod is gone, as raysim's
// and Ray's v1 autoscaler do; Ray 2.60's v2 instance manager empties it only with its next scale request).
// It returns the worker's name and the sidecar's log.
func (e *rayEnv) autoscales(t *testing.T, c *rayv1.RayCluster, cpus float64, clears bool, timeout time.Duration) (string, string) {
	t.Helper()
	name := c.Name
	e.createCluster(t, c)
	_, head, _ := e.waitClusterReadyWithin(t, name, 0, timeout)
	if len(head.Spec.Containers) != 2 || head.Spec.ServiceAccountName != name {
		t.Fatalf("head pod: %d containers, serviceAccountName %q", len(head.Spec.Containers), head.Spec.ServiceAccountName)
	}

	// A job asking for more CPUs than the head has waits until a worker joins.
	dash := jobs.NewClient("http://" + head.Status.PodIP + ":8265")
	dash.HTTP = e.in.PodHTTPClient(10 * time.Second)
	_, err := dash.Submit(e.ctx, jobs.SubmitRequest{Entrypoint: "echo ran on a new worker", SubmissionID: "big", EntrypointNumCPUs: ptr.To(cpus)})
	must(t, "submitting the job", err)
	submitted := time.Now()

	var worker string
	e.waitFor(t, timeout, "the autoscaler to scale the group up and a worker Pod to run", func(ctx context.Context) (bool, string, error) {
		g, pods, desc, err := e.workerGroup(ctx, name)
		if len(pods) == 1 {
			worker = pods[0].Name
		}
		return err == nil && ptr.Deref(g.Replicas, 0) == 1 && len(pods) == 1, desc, err
	})
	t.Logf("submitted → replicas 1 and worker Pod %s: %s", worker, time.Since(submitted).Round(time.Millisecond))
	e.waitFor(t, timeout, "the job to succeed", func(ctx context.Context) (bool, string, error) {
		d, err := dash.Get(ctx, "big")
		if err != nil {
			return false, "", err
		}
		return d.Status == jobs.StatusSucceeded, string(d.Status) + ": " + ptr.Deref(d.Message, ""), nil
	})
	succeeded := time.Now()
	t.Logf("submitted → job SUCCEEDED: %s", succeeded.Sub(submitted).Round(time.Millisecond))

	// The trace of the worker Pod starts at the sidecar's patch, written with its ServiceAccount.
	out, err := e.in.Rayctl(e.ctx, "trace", "pod/"+worker, "-n", e.ns, "-o", "json")
	must(t, "rayctl trace", err)
	var steps []chain.Step
	if err := json.Unmarshal([]byte(out), &steps); err != nil {
		t.Fatalf("rayctl trace -o json: %v\n%s", err, out)
	}
	sa := "system:serviceaccount:" + e.ns + ":" + name
	want := []hopPattern{
		{"apiserver", chain.APIWrite, "RayCluster", sa},
		{"raycluster", chain.InformerEvent, "RayCluster", "update"},
		{"raycluster", chain.ReconcileStart, "RayCluster", ""},
		{"raycluster", chain.ObjectWrite, "Pod", "create"},
		{"apiserver", chain.APIWrite, "Pod", "create"},
		{"kubelet", chain.KubeletWrite, "Pod", ""}, // Ready or not yet: the job may run before the readiness probe passes
	}
	if i, lines := matchInOrder(steps, want); i < len(want) {
		t.Errorf("trace of pod/%s lacks %s (in order):\n%s", worker, want[i], lines)
	}

	// Idle for idleTimeoutSeconds: the worker goes, named in workersToDelete, and the group returns to 0.
	e.waitFor(t, timeout, "the idle worker to go and replicas to return to 0", func(ctx context.Context) (bool, string, error) {
		g, pods, desc, err := e.workerGroup(ctx, name)
		return err == nil && ptr.Deref(g.Replicas, -1) == 0 && len(pods) == 0 && (!clears || len(g.ScaleStrategy.WorkersToDelete) == 0), desc, err
	})
	t.Logf("job SUCCEEDED → worker gone, replicas 0 (idleTimeoutSeconds %d): %s",
		ptr.Deref(c.Spec.AutoscalerOptions.IdleTimeoutSeconds, 60), time.Since(succeeded).Round(time.Millisecond))

	logs, _, err := e.in.Kubectl(e.ctx, "", "logs", "-n", e.ns, head.Name, "-c", "autoscaler")
	must(t, "the autoscaler's logs", err)
	t.Logf("the autoscaler's log:\n%s", logs)
	return worker, logs
}

// workerGroup reads the cluster's first worker group and its worker Pods, and describes them.
func (e *rayEnv) workerGroup(ctx context.Context, cluster string) (rayv1.WorkerGroupSpec, []corev1.Pod, string, error) {
	c, err := e.ray.RayV1().RayClusters(e.ns).Get(ctx, cluster, metav1.GetOptions{})
	if err != nil {
		return rayv1.WorkerGroupSpec{}, nil, "", err
	}
	pods, err := e.clusterPods(ctx, cluster, "worker")
	g := c.Spec.WorkerGroupSpecs[0]
	return g, pods, fmt.Sprintf("replicas %d, workersToDelete %v, worker pods %s",
		ptr.Deref(g.Replicas, -1), g.ScaleStrategy.WorkersToDelete, podNames(pods)), err
}
