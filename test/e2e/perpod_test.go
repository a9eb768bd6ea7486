package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/rayctl/rayctl/pkg/runtime/containerd"
	"github.com/rayctl/rayctl/test/e2e/framework"
)

// TestRuntimePerPod: as root beside the host's Ray and with containerd installed, `rayctl up` (auto)
// runs each pod on the runtime its image calls for, all on one pod network, and says so at start-up. A
// RayJob (K8sJobMode) whose submitter pod uses raysim's image, not Ray's, completes: the head runs the
// host's Ray as processes, the submitter runs in a containerd container, and its `ray job submit`
// (raysim's) reaches the real head's dashboard through the head Service's name. A pod whose
// runtimeClassName names no runtime of this node gets no sandbox, with an event saying which classes
// exist. Restarted, rayctl finds each pod's runtime again: exec reaches the head, logs the submitter.
func TestRuntimePerPod(t *testing.T) {
	t.Parallel()
	hostRay(t)
	if !containerd.Available() || os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("CI runs this test as root with containerd installed (.ci/run)")
		}
		t.Skip("needs root and containerd (apt-get install containerd runc)")
	}
	in, err := framework.Start("", "--runtime", "auto")
	if err != nil {
		t.Fatalf("rayctl up: %v", err)
	}
	t.Cleanup(func() { in.Cleanup(t) })
	if line := startupLine(in, "runtime"); !strings.Contains(line, "per pod, on one pod network: process for Ray's images (the host's Ray runs Ray's images") ||
		!strings.Contains(line, "containerd 1.") || !strings.Contains(line, `runtimeClassName "process" or "containerd" chooses`) {
		t.Errorf("the runtime line is %q, want the process runtime for Ray's images and containerd for the rest", line)
	}
	if line := startupLine(in, "ray"); !strings.Contains(line, "host Ray 2.60.0") || !strings.Contains(line, "containerd runs rayctl.local/raysim:latest") {
		t.Errorf("the ray line is %q", line)
	}

	realRaySlots <- struct{}{}
	defer func() { <-realRaySlots }()
	e := newRayEnv(t, in)
	_, cm := realRaySample(t)
	_, err = in.Client.CoreV1().ConfigMaps(e.ns).Create(e.ctx, cm, metav1.CreateOptions{})
	must(t, "creating the sample's ConfigMap", err)

	const name = "light-submitter"
	job := realJob(t, name, rayv1.K8sJobMode)
	job.Spec.SubmitterPodTemplate = &corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever,
		Containers:    []corev1.Container{{Name: "ray-job-submitter", Image: "rayctl.local/raysim:latest"}},
	}}
	created := time.Now()
	_, err = e.ray.RayV1().RayJobs(e.ns).Create(e.ctx, job, metav1.CreateOptions{})
	must(t, "creating the RayJob", err)

	// rayctl made a RuntimeClass per runtime, named after its handler.
	classes, stderr, err := in.Kubectl(e.ctx, "", "get", "runtimeclasses")
	if err != nil || !regexpMatch(`(?m)^containerd\s+containerd\s`, classes) || !regexpMatch(`(?m)^process\s+process\s`, classes) {
		t.Errorf("kubectl get runtimeclasses: %v\n%s%s", err, classes, stderr)
	}
	// A pod of raysim's image that asks for the process runtime gets it.
	asked := nodePod("asks-process", corev1.RestartPolicyNever, 0, corev1.Container{Name: "c", Image: "rayctl.local/raysim:latest", Command: []string{"ray", "--version"}})
	asked.Spec.RuntimeClassName = ptr.To("process")
	_, err = in.Client.CoreV1().Pods(e.ns).Create(e.ctx, asked, metav1.CreateOptions{})
	must(t, "creating a pod of class process", err)
	// Pods of a class that does not exist, or whose handler no runtime here has, wait without a sandbox,
	// as a kubelet keeps them, with the reason.
	_, err = in.Client.NodeV1().RuntimeClasses().Create(e.ctx, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "e2e-gvisor-" + e.ns}, Handler: "runsc"}, metav1.CreateOptions{})
	must(t, "creating a RuntimeClass of handler runsc", err)
	t.Cleanup(func() {
		_ = in.Client.NodeV1().RuntimeClasses().Delete(context.Background(), "e2e-gvisor-"+e.ns, metav1.DeleteOptions{})
	})
	for _, tc := range []struct{ pod, class, want string }{
		{"no-class", "no-such-class", `runtimeclasses.node.k8s.io "no-such-class" not found (kubectl get runtimeclasses lists those that exist)`},
		{"no-handler", "e2e-gvisor-" + e.ns, `unknown runtime handler "runsc": this node's runtime handlers are "containerd" (images, in containers) and "process"`},
	} {
		odd := nodePod(tc.pod, corev1.RestartPolicyNever, 0, corev1.Container{Name: "c", Image: "rayctl.local/raysim:latest", Command: []string{"true"}})
		odd.Spec.RuntimeClassName = ptr.To(tc.class)
		_, err = in.Client.CoreV1().Pods(e.ns).Create(e.ctx, odd, metav1.CreateOptions{})
		must(t, "creating a pod of class "+tc.class, err)
		for _, ev := range nodeWaitEvents(t, e.ctx, in, e.ns, odd.Name, "FailedCreatePodSandBox") {
			if ev.Reason == "FailedCreatePodSandBox" && !strings.Contains(ev.Message, tc.want) {
				t.Errorf("class %s: FailedCreatePodSandBox says %q, want %q", tc.class, ev.Message, tc.want)
			}
		}
	}

	got := e.waitRealJob(t, name)
	t.Logf("the RayJob ended %s after its creation (a figure, not a bound)", time.Since(created).Round(100*time.Millisecond))
	s := got.Status
	if s.JobDeploymentStatus != rayv1.JobDeploymentStatusComplete || s.JobStatus != rayv1.JobStatusSucceeded {
		t.Fatalf("RayJob ended %q/%q (reason %q, message %q); want Complete, SUCCEEDED", s.JobDeploymentStatus, s.JobStatus, s.Reason, s.Message)
	}
	out, stderr, err := in.Kubectl(e.ctx, "", "logs", "-n", e.ns, "job/"+name)
	if err != nil {
		t.Fatalf("kubectl logs job/%s: %v\n%s", name, err, stderr)
	}
	wantDriverOutput(t, "the submitter's log", out)

	head := e.liveHead(t, s.RayClusterName)
	submitter := submitterPod(t, e, name)
	ids := map[string]string{"head": containerIDOf(head), "submitter": containerIDOf(submitter)}
	if !strings.HasPrefix(ids["head"], "process://") {
		t.Errorf("the head's container is %q, want one of the process runtime (the host's Ray)", ids["head"])
	}
	if !strings.HasPrefix(ids["submitter"], "containerd://") {
		t.Errorf("the submitter's container is %q, want a containerd one", ids["submitter"])
	}
	framework.WaitFor(t, e.ctx, "the pod of class process to succeed", func() (bool, error) {
		p, err := in.Client.CoreV1().Pods(e.ns).Get(e.ctx, asked.Name, metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodSucceeded, err
	})
	if p, err := in.Client.CoreV1().Pods(e.ns).Get(e.ctx, asked.Name, metav1.GetOptions{}); err != nil || !strings.HasPrefix(containerIDOf(p), "process://") {
		t.Errorf("the pod of class process ran in %q (%v)", containerIDOf(p), err)
	}
	// What kubectl shows, and the containerd namespace itself.
	col, _, err := in.Kubectl(e.ctx, "", "get", "pod", "-n", e.ns, submitter.Name, "-o", "jsonpath={.status.containerStatuses[0].containerID}")
	if err != nil || col != ids["submitter"] {
		t.Errorf("kubectl get pod -o jsonpath shows %q (%v), want %q", col, err, ids["submitter"])
	}
	if tasks := containerdContainers(t, e.ctx, in); !strings.Contains(tasks, strings.TrimPrefix(ids["submitter"], "containerd://")) {
		t.Errorf("containerd's rayctl namespace lacks the submitter's container %s:\n%s", ids["submitter"], tasks)
	}

	// Restarted, rayctl finds each pod on its runtime: the head still runs the same container and takes
	// an exec, and the submitter's log comes from containerd's.
	must(t, "stopping", in.Stop())
	must(t, "restarting", in.Restart())
	framework.WaitFor(t, e.ctx, "the head pod Ready again", func() (bool, error) {
		p, err := in.Client.CoreV1().Pods(e.ns).Get(e.ctx, head.Name, metav1.GetOptions{})
		return err == nil && podReady(p) && containerIDOf(p) == ids["head"], err
	})
	if out, stderr, err := in.Kubectl(e.ctx, "", "exec", "-n", e.ns, head.Name, "-c", head.Spec.Containers[0].Name, "--", "ray", "--version"); err != nil || !strings.Contains(out, "2.60.0") {
		t.Errorf("exec in the head after a restart: %q %v\n%s", out, err, stderr)
	}
	if out, stderr, err := in.Kubectl(e.ctx, "", "logs", "-n", e.ns, submitter.Name); err != nil || !strings.Contains(out, realRayOutput[0]) {
		t.Errorf("the submitter's log after a restart: %v\n%s\n%s", err, out, stderr)
	}
	p, err := in.Client.CoreV1().Pods(e.ns).Get(e.ctx, submitter.Name, metav1.GetOptions{})
	must(t, "reading the submitter pod", err)
	if containerIDOf(p) != ids["submitter"] {
		t.Errorf("after a restart the submitter's container is %q, was %q", containerIDOf(p), ids["submitter"])
	}
}

// submitterPod is the pod of the RayJob's submitter Job.
func submitterPod(t *testing.T, e *rayEnv, job string) *corev1.Pod {
	t.Helper()
	pods, err := e.in.Client.CoreV1().Pods(e.ns).List(e.ctx, metav1.ListOptions{LabelSelector: "job-name=" + job})
	must(t, "listing the submitter's pods", err)
	if len(pods.Items) != 1 {
		t.Fatalf("want one submitter pod, got %d", len(pods.Items))
	}
	return &pods.Items[0]
}

// containerIDOf is the first container's ID as the pod's status shows it ("<runtime>://<id>").
func containerIDOf(p *corev1.Pod) string {
	if len(p.Status.ContainerStatuses) == 0 {
		return ""
	}
	return p.Status.ContainerStatuses[0].ContainerID
}

func regexpMatch(re, s string) bool { return regexp.MustCompile(re).MatchString(s) }

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// containerdContainers lists the containers of the instance's containerd (the socket its state file
// names, namespace rayctl) with containerd's own client, ctr.
func containerdContainers(t *testing.T, ctx context.Context, in *framework.Instance) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(in.DataDir, "rayctl.state"))
	must(t, "reading the instance's state", err)
	var st struct {
		ContainerdSocket string `json:"containerdSocket"`
	}
	must(t, "decoding the instance's state", json.Unmarshal(b, &st))
	if st.ContainerdSocket == "" {
		t.Fatalf("the instance's state names no containerd socket: %s", b)
	}
	out, err := exec.CommandContext(ctx, "ctr", "--address", st.ContainerdSocket, "--namespace", containerd.Namespace, "containers", "list", "-q").CombinedOutput()
	if err != nil {
		t.Fatalf("ctr containers list: %v\n%s", err, out)
	}
	return string(out)
}
