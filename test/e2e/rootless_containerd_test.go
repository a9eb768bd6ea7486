package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/rayctl/rayctl/pkg/runtime/containerd"
	"github.com/rayctl/rayctl/pkg/userns"
	"github.com/rayctl/rayctl/test/e2e/framework"
)

// laptopSubUIDs is the first of laptopUID's subordinate uids and how many there are (/etc/subuid), for a
// test that needs them: one that needs newuidmap and the range fails in CI (.ci/run makes both) and is
// skipped elsewhere, saying what to install.
func laptopSubUIDs(t *testing.T) (first, count uint32) {
	t.Helper()
	missing := func(why string) {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s: .ci/run installs uidmap and gives uid %d subordinate ids", why, laptopUID)
		}
		t.Skip(why + " (apt-get install uidmap; useradd gives a new user subordinate ids)")
	}
	if _, err := exec.LookPath("newuidmap"); err != nil {
		missing("newuidmap is not installed")
	}
	if _, err := user.LookupId(strconv.Itoa(laptopUID)); err != nil {
		missing(fmt.Sprintf("uid %d has no account (newuidmap needs one)", laptopUID))
	}
	first, count, ok := userns.SubordinateUIDs(laptopUID)
	if !ok {
		missing(fmt.Sprintf("uid %d has no subordinate uids in /etc/subuid", laptopUID))
	}
	return first, count
}

// TestLaptopRuntimePerPod: as an ordinary user with subordinate ids (a laptop user's account as useradd
// makes it) and containerd installed, rayctl runs Ray's images on the host's Ray and every other image on
// a containerd of its own inside its user namespace, all pods on one network: a RayJob whose submitter
// is the raysim image completes beside a head on the host's Ray; a container of an image whose files
// belong to another user runs as that user, which on the host is one of the user's subordinate ids,
// never root; its limits are said not to be enforced; the containers end with rayctl, whether it stops
// or is killed, and come back when it starts again.
func TestLaptopRuntimePerPod(t *testing.T) {
	subFirst, _ := laptopSubUIDs(t)
	if !containerd.Available() {
		if os.Getenv("CI") != "" {
			t.Fatal("CI installs containerd (.ci/run)")
		}
		t.Skip("needs containerd (apt-get install containerd runc)")
	}
	in := startLaptop(t, framework.TestContext(t, 2*time.Minute))
	if line := startupLine(in, "runtime"); !strings.Contains(line, "per pod, on one pod network") ||
		!strings.Contains(line, "private, rootless: inside rayctl's user namespace") || strings.Contains(line, "only your own ids") {
		t.Fatalf("the runtime line is %q, want containerd rootless beside the process runtime, with subordinate ids", line)
	}
	// realRaySetup makes the test parallel once it holds a slot for real Ray; e.ctx's deadline starts after it.
	e := realRaySetup(t, in)

	const name = "laptop-submitter"
	job := realJob(t, name, rayv1.K8sJobMode)
	job.Spec.SubmitterPodTemplate = &corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever,
		Containers:    []corev1.Container{{Name: "ray-job-submitter", Image: "rayctl.local/raysim:latest"}},
	}}
	_, err := e.ray.RayV1().RayJobs(e.ns).Create(e.ctx, job, metav1.CreateOptions{})
	must(t, "creating the RayJob", err)

	// An image whose files belong to uid 1000 (the raysim image's /home/ray, as Ray's images have it),
	// run as that user, with limits.
	other := nodePod("other-user", corev1.RestartPolicyAlways, 0, corev1.Container{
		Name: "c", Image: "rayctl.local/raysim:latest",
		Command:         []string{"/bin/sh", "-c", "echo uid=$(id -u) home=$(stat -c %u /home/ray); exec sleep 3600"},
		SecurityContext: &corev1.SecurityContext{RunAsUser: ptr.To[int64](1000), RunAsGroup: ptr.To[int64](100)},
		Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse("128Mi")}},
	})
	other.Spec.RuntimeClassName = ptr.To("containerd")
	_, err = in.Client.CoreV1().Pods(e.ns).Create(e.ctx, other, metav1.CreateOptions{})
	must(t, "creating a pod of uid 1000 on containerd", err)

	got := e.waitRealJob(t, name)
	if s := got.Status; s.JobDeploymentStatus != rayv1.JobDeploymentStatusComplete || s.JobStatus != rayv1.JobStatusSucceeded {
		t.Fatalf("RayJob ended %q/%q (reason %q, message %q); want Complete, SUCCEEDED", s.JobDeploymentStatus, s.JobStatus, s.Reason, s.Message)
	}
	head := e.liveHead(t, got.Status.RayClusterName)
	if id := containerIDOf(head); !strings.HasPrefix(id, "process://") {
		t.Errorf("the head's container is %q, want one of the process runtime (the host's Ray)", id)
	}
	if id := containerIDOf(submitterPod(t, e, name)); !strings.HasPrefix(id, "containerd://") {
		t.Errorf("the submitter's container is %q, want a containerd one", id)
	}

	pod := waitPodReady(t, e, other.Name, "")
	if logs, stderr, err := in.Kubectl(e.ctx, "", "logs", "-n", e.ns, other.Name); err != nil || !strings.Contains(logs, "uid=1000 home=1000") {
		t.Errorf("the pod of uid 1000 says %q (%v %s), want uid=1000 home=1000", logs, err, stderr)
	}
	for _, ev := range nodeWaitEvents(t, e.ctx, in, e.ns, other.Name, "LimitsNotEnforced") {
		if ev.Reason == "LimitsNotEnforced" && !strings.Contains(ev.Message, "rootless") {
			t.Errorf("LimitsNotEnforced says %q", ev.Message)
		}
	}
	// On the host, its process is the user's subordinate uid for 1000, never root nor the user.
	shim := shimOf(t, containerIDOf(pod))
	wantUID := subFirst + 999
	for _, pid := range shim.Children {
		if uid, ok := procUID(pid); ok && uid != wantUID {
			t.Errorf("the container's process %d (%s) runs as uid %d on the host, want %d (subordinate uid for 1000)", pid, comm(pid), uid, wantUID)
		}
	}
	if uid, ok := procUID(shim.PID); ok && uid != laptopUID {
		t.Errorf("the shim runs as uid %d on the host, want the user's %d", uid, laptopUID)
	}

	// Stopped, rayctl leaves nothing running: no containerd, shim or container.
	must(t, "stopping", in.Stop())
	if left := instanceProcesses(in.DataDir, append([]int{shim.PID}, shim.Children...)); len(left) > 0 {
		t.Errorf("after a stop, processes of the instance remain: %s", strings.Join(left, "; "))
	}
	// Started again, the pod's container runs again, in the new namespaces.
	must(t, "restarting", in.Restart())
	pod = waitPodReady(t, e, other.Name, containerIDOf(pod))

	// Killed (SIGKILL, as a crash), then started again: the killed rayctl's containers do not outlive
	// the next start, and the pod runs again.
	old := shimOf(t, containerIDOf(pod))
	in.Kill()
	must(t, "restarting after a kill", in.Restart())
	waitPodReady(t, e, other.Name, containerIDOf(pod))
	for _, pid := range append([]int{old.PID}, old.Children...) {
		if alive(pid) {
			t.Errorf("pid %d (%s) of the killed rayctl's containers still runs after the next start", pid, comm(pid))
		}
	}
	// Deleted, the pod goes: its container is killed although it has no cgroup to kill it through.
	must(t, "deleting the pod", in.Client.CoreV1().Pods(e.ns).Delete(e.ctx, other.Name, metav1.DeleteOptions{}))
	framework.WaitFor(t, e.ctx, "the deleted pod to go", func() (bool, error) {
		_, err := in.Client.CoreV1().Pods(e.ns).Get(e.ctx, other.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// waitPodReady waits for pod name to be Ready with a container other than notID, and returns it.
func waitPodReady(t *testing.T, e *rayEnv, name, notID string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	framework.WaitFor(t, e.ctx, "pod "+name+" Ready with a new container", func() (bool, error) {
		p, err := e.in.Client.CoreV1().Pods(e.ns).Get(e.ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pod = p
		return podReady(p) && containerIDOf(p) != notID && strings.HasPrefix(containerIDOf(p), "containerd://"), nil
	})
	return pod
}

// shimOf is the running shim of the container "containerd://<id>".
func shimOf(t *testing.T, containerID string) containerd.Shim {
	t.Helper()
	id := strings.TrimPrefix(containerID, "containerd://")
	for _, sh := range containerd.Shims() {
		if sh.ID == id {
			return sh
		}
	}
	t.Fatalf("no shim runs container %s", id)
	return containerd.Shim{}
}

// instanceProcesses lists the live processes (pid and command) among pids and those whose command line
// names dataDir (the instance's containerd, shims, slirp4netns).
func instanceProcesses(dataDir string, pids []int) []string {
	var out []string
	for _, pid := range pids {
		if alive(pid) {
			out = append(out, fmt.Sprintf("%d %s", pid, comm(pid)))
		}
	}
	return append(out, commandLinesNaming(dataDir)...)
}
