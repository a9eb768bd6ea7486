package podworker

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rayctl/rayctl/pkg/kubelet/probe"
	"github.com/rayctl/rayctl/pkg/runtime"
)

func nowTime() metav1.Time { return metav1.NewTime(time.Now().Truncate(time.Second)) }

// writeStatus computes the pod's status and writes it if it changed; it returns the computed status.
func (w *Worker) writeStatus(ctx context.Context, pod *corev1.Pod) corev1.PodStatus {
	st := w.computeStatus(pod)
	if _, err := w.deps.Status.SetPodStatus(ctx, pod, st); err != nil && ctx.Err() == nil {
		w.logger.Error(err, "writing pod status")
	}
	return st
}

// computeStatus derives the pod's status from what the worker knows, starting from the status the API
// holds (so fields the kubelet does not own, such as PodScheduled, the QoS class and other writers'
// conditions, stay as they are).
func (w *Worker) computeStatus(pod *corev1.Pod) corev1.PodStatus {
	base := w.deps.Status.Base(pod)
	st := *base.DeepCopy()
	if w.deps.HostIP != "" {
		st.HostIP = w.deps.HostIP
		st.HostIPs = []corev1.HostIP{{IP: w.deps.HostIP}}
	}
	if w.sandbox != nil && w.sandbox.IP != "" {
		st.PodIP = w.sandbox.IP
		st.PodIPs = []corev1.PodIP{{IP: w.sandbox.IP}}
	}
	if st.StartTime == nil && w.startTime != nil {
		t := *w.startTime
		st.StartTime = &t
	}

	initDone, initFailed := true, false
	var incomplete []string
	st.InitContainerStatuses = nil
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		cs := w.containerStatus(pod, c, true, !initDone)
		st.InitContainerStatuses = append(st.InitContainerStatuses, cs)
		if cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0 {
			continue
		}
		if initDone && cs.State.Terminated != nil && pod.Spec.RestartPolicy == corev1.RestartPolicyNever {
			initFailed = true
		}
		initDone = false
		incomplete = append(incomplete, c.Name)
	}
	st.ContainerStatuses = nil
	var unready []string
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		cs := w.containerStatus(pod, c, false, !initDone)
		st.ContainerStatuses = append(st.ContainerStatuses, cs)
		if !cs.Ready {
			unready = append(unready, c.Name)
		}
	}
	st.Phase = phase(pod, st, initDone, initFailed, w.terminal)
	if st.Phase == corev1.PodSucceeded || st.Phase == corev1.PodFailed {
		// A finished pod's containers are not ready whatever they last reported.
		unready = nil
		for i := range st.ContainerStatuses {
			st.ContainerStatuses[i].Ready = false
			unready = append(unready, st.ContainerStatuses[i].Name)
		}
	}

	sandboxReady := w.sandbox != nil && !w.tornDown
	setCondition(&st, corev1.PodReadyToStartContainers, sandboxReady, "", "")
	if initDone {
		setCondition(&st, corev1.PodInitialized, true, "", "")
	} else {
		setCondition(&st, corev1.PodInitialized, false, "ContainersNotInitialized", fmt.Sprintf("containers with incomplete status: [%s]", strings.Join(incomplete, " ")))
	}
	notReadyReason := "ContainersNotReady"
	if st.Phase == corev1.PodSucceeded {
		notReadyReason = "PodCompleted"
	}
	containersReady := len(unready) == 0 && initDone
	msg := ""
	switch {
	case !initDone:
		msg = fmt.Sprintf("containers with incomplete status: [%s]", strings.Join(incomplete, " "))
		if len(unready) > 0 {
			msg = fmt.Sprintf("containers with unready status: [%s]", strings.Join(unready, " "))
		}
	case len(unready) > 0:
		msg = fmt.Sprintf("containers with unready status: [%s]", strings.Join(unready, " "))
	}
	if containersReady {
		setCondition(&st, corev1.PodReady, true, "", "")
		setCondition(&st, corev1.ContainersReady, true, "", "")
	} else {
		setCondition(&st, corev1.PodReady, false, notReadyReason, msg)
		setCondition(&st, corev1.ContainersReady, false, notReadyReason, msg)
	}
	if containersReady {
		var gates []string
		for _, g := range pod.Spec.ReadinessGates {
			if !conditionTrue(st, g.ConditionType) {
				gates = append(gates, string(g.ConditionType))
			}
		}
		if len(gates) > 0 {
			setCondition(&st, corev1.PodReady, false, "ReadinessGatesNotReady", fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", gates[0]))
		}
	}
	return st
}

func conditionTrue(st corev1.PodStatus, t corev1.PodConditionType) bool {
	for _, c := range st.Conditions {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// setCondition sets a condition of the status, keeping its place and its lastTransitionTime unless
// its status changes.
func setCondition(st *corev1.PodStatus, t corev1.PodConditionType, ok bool, reason, message string) {
	status := corev1.ConditionFalse
	if ok {
		status = corev1.ConditionTrue
	}
	c := corev1.PodCondition{Type: t, Status: status, Reason: reason, Message: message, LastTransitionTime: nowTime()}
	for i := range st.Conditions {
		if st.Conditions[i].Type != t {
			continue
		}
		if st.Conditions[i].Status == status {
			c.LastTransitionTime = st.Conditions[i].LastTransitionTime
		}
		c.LastProbeTime = st.Conditions[i].LastProbeTime
		st.Conditions[i] = c
		return
	}
	st.Conditions = append(st.Conditions, c)
}

// containerStatus reports one container. blocked says the containers before it (init containers) have
// not all completed, so a container not yet made waits with PodInitializing.
func (w *Worker) containerStatus(pod *corev1.Pod, c *corev1.Container, init, blocked bool) corev1.ContainerStatus {
	cs := corev1.ContainerStatus{Name: c.Name, Image: c.Image}
	r := w.containers[c.Name]
	if r == nil || r.current == nil {
		reason := "ContainerCreating"
		if blocked && !init {
			reason = "PodInitializing"
		}
		waiting := &corev1.ContainerStateWaiting{Reason: reason}
		if r != nil && r.waiting != nil {
			waiting = r.waiting.DeepCopy()
		}
		cs.State.Waiting = waiting
		cs.Started = new(false)
		return cs
	}
	cur := r.current
	cs.ContainerID = w.containerID(cur)
	cs.ImageID = cur.ImageID
	if cs.ImageID == "" {
		cs.ImageID = r.imageID
	}
	cs.RestartCount = int32(cur.Attempt)
	switch cur.State {
	case runtime.StateRunning:
		cs.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(cur.StartedAt)}
		started := c.StartupProbe == nil || w.probeResult(cur.ID, probe.Startup) == probe.Success
		cs.Started = new(started)
		switch {
		case init:
			cs.Ready = false
		case !started:
			cs.Ready = false
		case c.ReadinessProbe == nil:
			cs.Ready = true
		default:
			cs.Ready = w.probeResult(cur.ID, probe.Readiness) == probe.Success
		}
	case runtime.StateExited:
		term := terminated(cur, cs.ContainerID)
		if r.waiting != nil {
			cs.State.Waiting = r.waiting.DeepCopy()
			cs.LastTerminationState.Terminated = term
		} else {
			cs.State.Terminated = term
			cs.Ready = init && term.ExitCode == 0
		}
		cs.Started = new(false)
	default:
		waiting := &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}
		if r.waiting != nil {
			waiting = r.waiting.DeepCopy()
		}
		cs.State.Waiting = waiting
		cs.Started = new(false)
	}
	if cs.LastTerminationState.Terminated == nil && r.previous != nil && r.previous.State == runtime.StateExited {
		cs.LastTerminationState.Terminated = terminated(r.previous, w.containerID(r.previous))
	}
	return cs
}

// terminated reports an exited container as the Pod API shows it.
func terminated(c *runtime.ContainerStatus, containerID string) *corev1.ContainerStateTerminated {
	reason := c.Reason
	if reason == "" {
		reason = "Completed"
		if c.ExitCode != 0 {
			reason = "Error"
		}
	}
	t := &corev1.ContainerStateTerminated{
		ExitCode:    int32(c.ExitCode),
		Reason:      reason,
		Message:     c.Message,
		FinishedAt:  metav1.NewTime(c.FinishedAt),
		ContainerID: containerID,
	}
	if !c.StartedAt.IsZero() {
		t.StartedAt = metav1.NewTime(c.StartedAt)
	}
	return t
}

// phase follows the kubelet's rules: Pending until init containers complete (Failed if one failed and
// the pod never restarts) and while any container waits for its first run; Running while any runs;
// once all have stopped, Succeeded or Failed as their exit codes and the restart policy decide.
func phase(pod *corev1.Pod, st corev1.PodStatus, initDone, initFailed, terminating bool) corev1.PodPhase {
	if !initDone {
		if initFailed {
			return corev1.PodFailed
		}
		return corev1.PodPending
	}
	var running, waiting, stopped, succeeded int
	for _, cs := range st.ContainerStatuses {
		switch {
		case cs.State.Running != nil:
			running++
		case cs.State.Terminated != nil:
			stopped++
			if cs.State.Terminated.ExitCode == 0 {
				succeeded++
			}
		case cs.State.Waiting != nil:
			if cs.LastTerminationState.Terminated != nil {
				stopped++
			} else {
				waiting++
			}
		}
	}
	switch {
	case waiting > 0 && !terminating:
		return corev1.PodPending
	case running > 0:
		return corev1.PodRunning
	case stopped > 0:
		if terminating {
			if stopped == succeeded {
				return corev1.PodSucceeded
			}
			return corev1.PodFailed
		}
		switch pod.Spec.RestartPolicy {
		case corev1.RestartPolicyAlways:
			return corev1.PodRunning
		case corev1.RestartPolicyNever:
			if stopped == succeeded {
				return corev1.PodSucceeded
			}
			return corev1.PodFailed
		default:
			if stopped == succeeded {
				return corev1.PodSucceeded
			}
			return corev1.PodRunning
		}
	case terminating:
		return corev1.PodFailed
	}
	return corev1.PodPending
}

// containerID is c's ID as the Pod status shows it: "<runtime>://<id>", naming the runtime that runs c.
func (w *Worker) containerID(c *runtime.ContainerStatus) string {
	name := c.Runtime
	if name == "" {
		name = w.deps.Runtime.Name()
	}
	return name + "://" + c.ID
}
