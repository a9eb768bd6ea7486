package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rayctl/rayctl/pkg/runtime/containerd"
	"github.com/rayctl/rayctl/pkg/runtime/hostray"
	"github.com/rayctl/rayctl/test/e2e/framework"
)

// startupLine is the line `rayctl up` printed for its start-up step name ("runtime", "ray", …).
func startupLine(in *framework.Instance, name string) string {
	return regexp.MustCompile(`(?m)^  ` + name + ` .*$`).FindString(in.Output.String())
}

// hostRay is the venv `make ray` makes beside the rayctl under test, or the test is skipped (outside CI)
// or fails (in CI, where .ci/run installs it) saying why.
func hostRay(t *testing.T) string {
	t.Helper()
	bin, err := framework.Binary()
	must(t, "the rayctl binary", err)
	ray := hostray.BesideBinary(bin)
	if _, err := os.Stat(ray); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no Ray at %s: .ci/run installs it with `make ray` (%v)", ray, err)
		}
		t.Skipf("no Ray at %s (`make ray` installs the pinned ray[default]); this test runs real Ray", ray)
	}
	return ray
}

// TestHostRayIsFound starts rayctl with --runtime=auto beside the `make ray` venv: it takes the process
// runtime for Ray's images, since the host's Ray runs them (containerd would pull them), and says at
// start-up which Ray, with its version and path, runs Ray's images, and what runs rayctl's own image
// (raysim on the process runtime; in containerd where containerd runs the other images beside it).
// --ray=sim says raysim runs both; --runtime=containerd says containerd pulls Ray's images;
// --ray=host with containerd, or with a path that is no Ray, refuses to start, saying why.
func TestHostRayIsFound(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ray := hostRay(t)
	in, err := framework.Start("", "--runtime", "auto", "--controllers", "none")
	if err != nil {
		t.Fatalf("rayctl up: %v", err)
	}
	t.Cleanup(func() { in.Cleanup(t) })
	// As root with containerd installed, containerd runs every other image beside it (TestRuntimePerPod).
	perPod := containerd.Available() && os.Geteuid() == 0
	wantRuntime := "process (the host's Ray runs Ray's images; containerd would pull them (--ray=image);"
	want := "host Ray 2.60.0 (" + ray + ") for rayproject/ray images; raysim for rayctl.local/raysim:latest"
	if perPod {
		wantRuntime = "per pod, on one pod network: process for Ray's images (the host's Ray runs Ray's images; containerd would pull them (--ray=image)), containerd "
		want = "host Ray 2.60.0 (" + ray + ") for rayproject/ray images (process runtime); containerd runs rayctl.local/raysim:latest (raysim inside) and every other image"
	}
	if line := startupLine(in, "runtime"); !strings.Contains(line, wantRuntime) {
		t.Errorf("with the host's Ray, --runtime=auto says %q, want %q", line, wantRuntime)
	}
	if line := startupLine(in, "ray"); !strings.HasSuffix(line, want) {
		t.Errorf("the start-up's ray line is %q, want it to end in %q\n%s", line, want, in.Output.String())
	}

	// A pod of an older Ray image runs the host's Ray (its python imports Ray 2.60.0), and its events say
	// so, with a warning that the versions differ.
	ns := newNamespace(t, ctx, in)
	pod := nodePod("ray-version", corev1.RestartPolicyNever, 0, corev1.Container{
		Name: "c", Image: "rayproject/ray:2.46.0-py311",
		Command: []string{"python", "-c", "import ray; print('ray', ray.__version__)"},
	})
	_, err = in.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	must(t, "creating the pod", err)
	framework.WaitFor(t, ctx, "the pod to succeed", func() (bool, error) {
		p, err := in.Client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err == nil && p.Status.Phase == corev1.PodFailed {
			t.Fatalf("the pod failed: %s", nodePodSummary(p))
		}
		return err == nil && p.Status.Phase == corev1.PodSucceeded, err
	})
	got, err := in.Client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
	must(t, "reading the pod", err)
	if log := nodeContainerLog(t, ctx, in, got, "c"); !strings.Contains(log, "ray 2.60.0") {
		t.Errorf("the container's python printed %q, want ray 2.60.0", log)
	}
	events := nodeWaitEvents(t, ctx, in, ns, pod.Name, "HostRay", "RayVersionMismatch")
	for _, e := range events {
		switch e.Reason {
		case "HostRay":
			if e.Type != corev1.EventTypeNormal || !strings.Contains(e.Message, "host Ray 2.60.0 ("+ray+") runs image rayproject/ray:2.46.0-py311") {
				t.Errorf("HostRay event: %s %q", e.Type, e.Message)
			}
		case "RayVersionMismatch":
			if e.Type != corev1.EventTypeWarning || !strings.Contains(e.Message, "is Ray 2.46.0, but the host's Ray 2.60.0 runs it") {
				t.Errorf("RayVersionMismatch event: %s %q", e.Type, e.Message)
			}
		}
	}
	zero := int64(0)
	must(t, "deleting the pod", in.Client.CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}))
	must(t, "stopping", in.Stop())

	in.ExtraArgs = append(in.ExtraArgs, "--ray", "sim")
	must(t, "rayctl up --ray sim", in.Restart())
	wantSim := "raysim for rayproject/ray images and rayctl.local/raysim:latest (--ray=sim)"
	if perPod {
		wantSim = "raysim for rayproject/ray images (process runtime); containerd runs rayctl.local/raysim:latest and every other image"
	}
	if line := startupLine(in, "ray"); !strings.Contains(line, wantSim) {
		t.Errorf("with --ray=sim the ray line is %q", line)
	}
	must(t, "stopping", in.Stop())

	if containerd.Available() && os.Geteuid() == 0 {
		in.ExtraArgs = append(in.ExtraArgs, "--ray", "auto", "--runtime", "containerd")
		must(t, "rayctl up --runtime containerd", in.Restart())
		want := "the containerd runtime pulls rayproject/ray images from their registry (host Ray 2.60.0 (" + ray + ") runs them with --ray=host)"
		if line := startupLine(in, "ray"); !strings.Contains(line, want) {
			t.Errorf("with --runtime=containerd the ray line is %q, want %q", line, want)
		}
		must(t, "stopping", in.Stop())
		in.ExtraArgs = append(in.ExtraArgs, "--ray", "host")
		if err := in.Restart(); err == nil || !strings.Contains(err.Error(), "--ray=host runs Ray's images on the host's Ray, with the process runtime; --runtime=containerd runs the images themselves (--ray=image)") {
			t.Errorf("rayctl up --ray host --runtime containerd: %v, want a refusal saying why", err)
		}
		in.ExtraArgs = append(in.ExtraArgs, "--runtime", "auto")
	}

	notRay := filepath.Join(t.TempDir(), "ray")
	must(t, "writing a ray that is none", os.WriteFile(notRay, []byte("#!/bin/sh\necho 'command not found' >&2; exit 127\n"), 0o755))
	in.ExtraArgs = append(in.ExtraArgs, "--ray", "host", "--ray-path", notRay)
	err = in.Restart()
	if err == nil || !strings.Contains(err.Error(), notRay+" --version") || !strings.Contains(err.Error(), "command not found") {
		t.Errorf("rayctl up --ray host --ray-path %s: %v, want a refusal naming it and what it said", notRay, err)
	}
}
