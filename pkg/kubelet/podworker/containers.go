package podworker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rayctl/rayctl/pkg/kubelet/podenv"
	"github.com/rayctl/rayctl/pkg/kubelet/probe"
	"github.com/rayctl/rayctl/pkg/kubelet/volume"
	"github.com/rayctl/rayctl/pkg/runtime"
)

// syncRunning drives a live pod one step: sandbox, volumes, init containers in order, then the
// containers. It returns how soon it wants to run again (0: only when woken).
func (w *Worker) syncRunning(ctx context.Context, pod *corev1.Pod) time.Duration {
	if w.startTime == nil {
		now := nowTime()
		w.startTime = &now
	}
	if w.sandbox == nil || !w.sandboxChecked {
		if err := w.ensureSandbox(ctx, pod); err != nil {
			w.event(pod, "", corev1.EventTypeWarning, "FailedCreatePodSandBox", "Failed to create pod sandbox: "+err.Error())
			return retryDelay
		}
	}
	if w.volumes == nil || (!w.volumesRenew.IsZero() && !time.Now().Before(w.volumesRenew)) {
		in := w.envInput(pod)
		paths, renew, err := volume.Setup(ctx, in, filepath.Join(w.podDir(), "volumes"))
		switch {
		case err != nil && w.volumes == nil:
			w.event(pod, "", corev1.EventTypeWarning, "FailedMount", "MountVolume.SetUp failed: "+err.Error())
			return retryDelay
		case err != nil:
			// A renewal that failed: the containers run on with the tokens they have, and it is tried again.
			w.event(pod, "", corev1.EventTypeWarning, "FailedMount", "MountVolume.SetUp failed: "+err.Error())
			w.volumesRenew = time.Now().Add(retryDelay)
		default:
			w.volumes, w.volumesRenew = paths, renew
		}
	}
	var next waker
	initDone := true
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		r := w.rec(c.Name)
		if r.current != nil && r.current.State == runtime.StateExited && r.current.ExitCode == 0 {
			r.waiting = nil
			continue
		}
		initDone = false
		switch {
		case r.current == nil:
			next.at(w.start(ctx, pod, c, r, 0))
		case r.current.State == runtime.StateCreated:
			next.at(w.restart(ctx, pod, c, r))
		case r.current.State == runtime.StateExited:
			if pod.Spec.RestartPolicy != corev1.RestartPolicyNever {
				next.at(w.restart(ctx, pod, c, r))
			} else {
				r.waiting = nil // it stays as it ended (a failed start included)
			}
		}
		break
	}
	if !initDone {
		return next.after()
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		r := w.rec(c.Name)
		switch {
		case r.current == nil:
			next.at(w.start(ctx, pod, c, r, 0))
		case r.current.State == runtime.StateCreated:
			// Made but never started: a start that failed without the runtime recording it, or one a
			// crash cut short. As the kubelet does, start a new attempt whatever the restart policy.
			next.at(w.restart(ctx, pod, c, r))
		case r.current.State == runtime.StateRunning:
			w.ensureProbes(pod, c, r.current)
			if kind, failed := w.probeFailed(r.current.ID); failed {
				msg := fmt.Sprintf("Container %s failed %s probe, will be restarted", c.Name, lowerKind(kind))
				w.killContainer(ctx, pod, c, c.Name, r.current.ID, probeGrace(pod, c, kind), msg)
				w.refresh(ctx)
				next.at(time.Now())
			}
		case r.current.State == runtime.StateExited:
			w.stopProbes(r.current.ID)
			if shouldRestart(pod.Spec.RestartPolicy, r.current.ExitCode) {
				next.at(w.restart(ctx, pod, c, r))
			} else {
				r.waiting = nil // it stays as it ended (a failed start included)
			}
		}
	}
	return next.after()
}

func lowerKind(k probe.Kind) string {
	switch k {
	case probe.Liveness:
		return "liveness"
	case probe.Startup:
		return "startup"
	}
	return "readiness"
}

// probeGrace is how long a container failing a probe gets to stop.
func probeGrace(pod *corev1.Pod, c *corev1.Container, kind probe.Kind) time.Duration {
	p := c.LivenessProbe
	if kind == probe.Startup {
		p = c.StartupProbe
	}
	if p != nil && p.TerminationGracePeriodSeconds != nil {
		return time.Duration(*p.TerminationGracePeriodSeconds) * time.Second
	}
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		return time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	return 30 * time.Second
}

func shouldRestart(policy corev1.RestartPolicy, exitCode int) bool {
	switch policy {
	case corev1.RestartPolicyNever:
		return false
	case corev1.RestartPolicyOnFailure:
		return exitCode != 0
	}
	return true
}

// waker keeps the earliest of several wake-up times.
type waker struct{ t time.Time }

func (k *waker) at(t time.Time) {
	if !t.IsZero() && (k.t.IsZero() || t.Before(k.t)) {
		k.t = t
	}
}

func (k *waker) after() time.Duration {
	if k.t.IsZero() {
		return 0
	}
	if d := time.Until(k.t); d > time.Millisecond {
		return d
	}
	return time.Millisecond
}

func (w *Worker) rec(name string) *containerRecord {
	r, ok := w.containers[name]
	if !ok {
		r = &containerRecord{}
		w.containers[name] = r
	}
	return r
}

// restart starts the next attempt of an exited container unless it is backing off; it returns when
// to look again.
func (w *Worker) restart(ctx context.Context, pod *corev1.Pod, c *corev1.Container, r *containerRecord) time.Time {
	now := time.Now()
	finished := r.current.FinishedAt
	if finished.IsZero() {
		finished = now
	}
	if until := r.crash.waitUntil(w.deps.CrashBackoff, finished, now); !until.IsZero() {
		r.waiting = &corev1.ContainerStateWaiting{
			Reason:  "CrashLoopBackOff",
			Message: fmt.Sprintf("back-off %s restarting failed container=%s pod=%s", r.crash.delay, c.Name, podString(pod)),
		}
		if !r.backoffReported.Equal(finished) {
			r.backoffReported = finished
			w.event(pod, c.Name, corev1.EventTypeWarning, "BackOff", fmt.Sprintf("Back-off restarting failed container %s in pod %s", c.Name, podString(pod)))
		}
		return until
	}
	r.crash.next(w.deps.CrashBackoff, now)
	return w.start(ctx, pod, c, r, r.current.Attempt+1)
}

func podString(pod *corev1.Pod) string {
	return fmt.Sprintf("%s_%s(%s)", pod.Name, pod.Namespace, pod.UID)
}

// start pulls the image and creates and starts attempt of container c. On failure it leaves the
// reason in r.waiting and returns when to try again.
func (w *Worker) start(ctx context.Context, pod *corev1.Pod, c *corev1.Container, r *containerRecord, attempt int) time.Time {
	if until := w.pullImage(ctx, pod, c, r); !until.IsZero() {
		return until
	}
	cfg, err := w.containerConfig(ctx, pod, c, attempt)
	if err != nil {
		r.waiting = &corev1.ContainerStateWaiting{Reason: "CreateContainerConfigError", Message: err.Error()}
		w.event(pod, c.Name, corev1.EventTypeWarning, "Failed", "Error: "+err.Error())
		return time.Now().Add(retryDelay)
	}
	id, err := w.deps.Runtime.CreateContainer(ctx, w.sandbox, cfg)
	if err != nil {
		r.waiting = &corev1.ContainerStateWaiting{Reason: "CreateContainerError", Message: err.Error()}
		w.event(pod, c.Name, corev1.EventTypeWarning, "Failed", "Error: "+err.Error())
		return time.Now().Add(retryDelay)
	}
	w.event(pod, c.Name, corev1.EventTypeNormal, "Created", "Created container: "+c.Name)
	// Keep the attempt before as "previous" (for lastState and `logs --previous`); older ones go.
	if r.previous != nil {
		if err := w.deps.Runtime.RemoveContainer(ctx, r.previous.ID); err != nil && !errors.Is(err, runtime.ErrNotFound) {
			w.logger.Error(err, "removing an old container", "container", c.Name)
		}
	}
	r.previous = r.current
	if r.previous != nil {
		w.stopProbes(r.previous.ID)
	}
	r.waiting = nil
	startErr := w.deps.Runtime.StartContainer(ctx, id)
	if st, err := w.deps.Runtime.ContainerStatus(ctx, id); err == nil {
		r.current = st
	} else {
		r.current = &runtime.ContainerStatus{ID: id, Name: c.Name, Attempt: attempt, State: runtime.StateCreated, LogPath: cfg.LogPath, Image: cfg.Image}
	}
	w.publishLogs()
	if startErr != nil {
		w.event(pod, c.Name, corev1.EventTypeWarning, "Failed", "Error: "+startErr.Error())
		if r.current.State == runtime.StateExited && !shouldRestart(pod.Spec.RestartPolicy, r.current.ExitCode) {
			return time.Time{} // no next attempt: the container shows as it ended
		}
		r.waiting = &corev1.ContainerStateWaiting{Reason: "RunContainerError", Message: startErr.Error()}
		return time.Now().Add(retryDelay)
	}
	w.event(pod, c.Name, corev1.EventTypeNormal, "Started", "Started container "+c.Name)
	return time.Time{}
}

// pullImage makes the container's image present per its pull policy, with the kubelet's events and
// back-off. It returns a zero time when the image is ready, else when to try again.
func (w *Worker) pullImage(ctx context.Context, pod *corev1.Pod, c *corev1.Container, r *containerRecord) time.Time {
	ctx = runtime.WithPod(ctx, string(pod.UID))
	now := time.Now()
	if until := r.pull.waitUntil(w.deps.CrashBackoff, r.pull.lastUpdate, now); !until.IsZero() {
		if r.waiting == nil || r.waiting.Reason != "ImagePullBackOff" {
			w.event(pod, c.Name, corev1.EventTypeNormal, "BackOff", fmt.Sprintf("Back-off pulling image %q", c.Image))
		}
		r.waiting = &corev1.ContainerStateWaiting{
			Reason:  "ImagePullBackOff",
			Message: fmt.Sprintf("Back-off pulling image %q: %s", c.Image, r.pullError),
		}
		return until
	}
	policy := runtime.PullPolicy(c.ImagePullPolicy)
	if policy == "" {
		policy = runtime.PullIfNotPresent
	}
	present := false
	var presentImage *runtime.Image
	if policy != runtime.PullAlways {
		if imgs, err := w.deps.Runtime.ListImages(ctx); err == nil {
			for _, img := range imgs {
				if img.Ref == c.Image {
					present = true
					r.imageID = img.ID
					presentImage = img
				}
			}
		}
	}
	switch {
	case present:
		w.event(pod, c.Name, corev1.EventTypeNormal, "Pulled", fmt.Sprintf("Container image %q already present on machine", c.Image))
		w.imageNotes(pod, c.Name, presentImage)
		r.pull.reset()
		return time.Time{}
	case policy == runtime.PullNever:
		msg := fmt.Sprintf("Container image %q is not present with pull policy of Never", c.Image)
		r.waiting = &corev1.ContainerStateWaiting{Reason: "ErrImageNeverPull", Message: msg}
		w.event(pod, c.Name, corev1.EventTypeWarning, "ErrImageNeverPull", msg)
		return now.Add(retryDelay)
	}
	w.event(pod, c.Name, corev1.EventTypeNormal, "Pulling", fmt.Sprintf("Pulling image %q", c.Image))
	start := time.Now()
	img, err := w.deps.Runtime.EnsureImage(ctx, c.Image, policy, nil)
	if err != nil {
		r.pullError = err.Error()
		r.pull.next(w.deps.CrashBackoff, time.Now())
		msg := fmt.Sprintf("Failed to pull image %q: %v", c.Image, err)
		r.waiting = &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: msg}
		w.event(pod, c.Name, corev1.EventTypeWarning, "Failed", msg)
		w.event(pod, c.Name, corev1.EventTypeWarning, "Failed", "Error: ErrImagePull")
		return time.Now().Add(time.Millisecond)
	}
	r.pull.reset()
	r.pullError = ""
	r.imageID = img.ID
	took := time.Since(start).Round(time.Millisecond)
	w.event(pod, c.Name, corev1.EventTypeNormal, "Pulled", fmt.Sprintf("Successfully pulled image %q in %s (%s including waiting). Image size: %d bytes.", c.Image, took, took, img.Size))
	w.imageNotes(pod, c.Name, img)
	return time.Time{}
}

// imageNotes posts what the runtime tells about running img (which program stands in, a version that
// differs) as events of the container.
func (w *Worker) imageNotes(pod *corev1.Pod, container string, img *runtime.Image) {
	for _, n := range img.Notes {
		kind := corev1.EventTypeNormal
		if n.Warning {
			kind = corev1.EventTypeWarning
		}
		w.event(pod, container, kind, n.Reason, n.Message)
	}
}

// deviceEnv gives c the node's accelerators its limits ask for, as a device plugin would: env with the
// variables naming them set (replacing the container's own). A device this machine lacks is said in a
// warning event: the container is told of it, and whatever uses it fails.
func (w *Worker) deviceEnv(pod *corev1.Pod, c *corev1.Container, env []runtime.EnvVar) ([]runtime.EnvVar, error) {
	if w.deps.Devices == nil {
		return env, nil
	}
	alloc, err := w.deps.Devices.Allocate(pod.UID, c.Name, c.Resources.Limits)
	if err != nil {
		return nil, fmt.Errorf("allocating devices: %w", err)
	}
	if len(alloc.Env) == 0 {
		return env, nil
	}
	set := map[string]bool{}
	var named []string
	for _, e := range alloc.Env {
		set[e.Name] = true
		named = append(named, e.Name+"="+e.Value)
	}
	env = slices.DeleteFunc(slices.Clone(env), func(e runtime.EnvVar) bool { return set[e.Name] })
	env = append(env, alloc.Env...)
	if len(alloc.Missing) > 0 {
		w.event(pod, c.Name, corev1.EventTypeWarning, "DeviceNotPresent", fmt.Sprintf(
			"node %s advertises %s, which this machine does not have: the container is given %s as on a node with them, so that "+
				"scheduling and Ray's resource accounting behave as there, but nothing in it can use the device (a CUDA or TPU call fails)",
			w.deps.NodeName, strings.Join(alloc.Missing, ", "), strings.Join(named, " ")))
	}
	return env, nil
}

// containerConfig builds what the runtime needs to create attempt of c.
func (w *Worker) containerConfig(ctx context.Context, pod *corev1.Pod, c *corev1.Container, attempt int) (runtime.ContainerConfig, error) {
	env, err := podenv.Environment(ctx, w.envInput(pod), c)
	if err != nil {
		return runtime.ContainerConfig{}, err
	}
	if env, err = w.deviceEnv(pod, c, env); err != nil {
		return runtime.ContainerConfig{}, err
	}
	lookup := podenv.Lookup(env)
	mounts, err := volume.Mounts(c, w.volumes)
	if err != nil {
		return runtime.ContainerConfig{}, err
	}
	sb := w.sandbox
	for _, f := range []struct{ host, target string }{
		{sb.HostsPath, "/etc/hosts"}, {sb.ResolvConfPath, "/etc/resolv.conf"}, {sb.HostnamePath, "/etc/hostname"},
	} {
		if f.host != "" && !mountedAt(mounts, f.target) {
			mounts = append(mounts, runtime.Mount{HostPath: f.host, ContainerPath: f.target})
		}
	}
	logPath := filepath.Join(w.podDir(), "logs", c.Name, strconv.Itoa(attempt)+".log")
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return runtime.ContainerConfig{}, err
	}
	cfg := runtime.ContainerConfig{
		Name:       c.Name,
		Attempt:    attempt,
		Init:       slices.ContainsFunc(pod.Spec.InitContainers, func(ic corev1.Container) bool { return ic.Name == c.Name }),
		Image:      c.Image,
		Command:    podenv.ExpandAll(c.Command, lookup),
		Args:       podenv.ExpandAll(c.Args, lookup),
		Env:        env,
		WorkingDir: c.WorkingDir,
		Mounts:     mounts,
		LogPath:    logPath,
		Resources:  resources(c),
		TTY:        c.TTY,
		Stdin:      c.Stdin,
		Labels: map[string]string{
			LabelPodUID:        string(pod.UID),
			LabelPodName:       pod.Name,
			LabelPodNamespace:  pod.Namespace,
			LabelContainerName: c.Name,
			LabelAttempt:       strconv.Itoa(attempt),
		},
	}
	if psc := pod.Spec.SecurityContext; psc != nil {
		cfg.RunAsUser, cfg.RunAsGroup = psc.RunAsUser, psc.RunAsGroup
	}
	if sc := c.SecurityContext; sc != nil {
		if sc.RunAsUser != nil {
			cfg.RunAsUser = sc.RunAsUser
		}
		if sc.RunAsGroup != nil {
			cfg.RunAsGroup = sc.RunAsGroup
		}
		cfg.Privileged = sc.Privileged != nil && *sc.Privileged
	}
	return cfg, nil
}

func mountedAt(mounts []runtime.Mount, target string) bool {
	for _, m := range mounts {
		if m.ContainerPath == target {
			return true
		}
	}
	return false
}

// resources turns a container's limits and cpu request into the runtime's terms.
func resources(c *corev1.Container) runtime.Resources {
	var r runtime.Resources
	if q, ok := c.Resources.Limits[corev1.ResourceCPU]; ok {
		r.CPUMillis = q.MilliValue()
	}
	if q, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
		r.MemoryBytes = q.Value()
	}
	shares := int64(2)
	if q, ok := c.Resources.Requests[corev1.ResourceCPU]; ok {
		shares = max(q.MilliValue()*1024/1000, 2)
	}
	r.CPUShares = shares
	return r
}

// envInput is what environments and downward API volumes are resolved from.
func (w *Worker) envInput(pod *corev1.Pod) podenv.Input {
	in := podenv.Input{Pod: pod, HostIP: w.deps.HostIP, NodeAllocatable: w.deps.Allocatable, Sources: w.deps.Sources, APIServer: w.deps.APIServer}
	if w.sandbox != nil {
		in.PodIP = w.sandbox.IP
	}
	return in
}

// ensureSandbox makes the pod's sandbox: hostname, DNS, host aliases.
func (w *Worker) ensureSandbox(ctx context.Context, pod *corev1.Pod) error {
	dir := filepath.Join(w.podDir(), "sandbox")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	hostname := pod.Name
	if pod.Spec.Hostname != "" {
		hostname = pod.Spec.Hostname
	}
	if len(hostname) > 63 {
		hostname = hostname[:63]
	}
	cfg := runtime.SandboxConfig{
		PodUID: string(pod.UID), Namespace: pod.Namespace, Name: pod.Name,
		Hostname: hostname, Subdomain: pod.Spec.Subdomain,
		HostNetwork:           pod.Spec.HostNetwork,
		ShareProcessNamespace: pod.Spec.ShareProcessNamespace != nil && *pod.Spec.ShareProcessNamespace,
		DNS:                   PodDNS(pod, w.deps.ClusterDNS, w.deps.ClusterDomain, w.deps.HostDNS),
		Dir:                   dir,
		Labels: map[string]string{
			LabelPodUID: string(pod.UID), LabelPodName: pod.Name, LabelPodNamespace: pod.Namespace,
		},
	}
	if name := pod.Spec.RuntimeClassName; name != nil && *name != "" {
		// As a kubelet does: the class's handler names the runtime; a class that does not exist leaves
		// the pod without a sandbox (runtimeclass.node.k8s.io "x" not found).
		rc, err := w.deps.Client.NodeV1().RuntimeClasses().Get(ctx, *name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("%w (kubectl get runtimeclasses lists those that exist)", err)
		}
		if err != nil {
			return err
		}
		cfg.RuntimeHandler = rc.Handler
	}
	for _, c := range pod.Spec.InitContainers {
		cfg.Images = append(cfg.Images, c.Image)
	}
	for _, c := range pod.Spec.Containers {
		cfg.Images = append(cfg.Images, c.Image)
	}
	for _, a := range pod.Spec.HostAliases {
		cfg.HostAliases = append(cfg.HostAliases, runtime.HostAlias{IP: a.IP, Hostnames: a.Hostnames})
	}
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			cfg.Ports = append(cfg.Ports, runtime.Port{Container: c.Name, Name: p.Name, Port: p.ContainerPort, Protocol: string(p.Protocol)})
		}
	}
	sb, err := w.deps.Runtime.RunSandbox(ctx, cfg)
	if err != nil {
		return err
	}
	w.sandbox, w.sandboxChecked = sb, true
	w.publishSandbox()
	return nil
}
