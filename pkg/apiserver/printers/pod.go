package printers

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// nodeUnreachablePodReason is the status reason the node lifecycle controller
// gives pods on a node that stopped answering.
const nodeUnreachablePodReason = "NodeLost"

var podColumns = []metav1.TableColumnDefinition{
	nameColumn(),
	col("Ready", "string", "The aggregate readiness state of this pod for accepting traffic."),
	col("Status", "string", "The aggregate status of the containers in this pod."),
	col("Restarts", "string", "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted."),
	ageColumn(),
	wideCol("IP", "string", corev1.PodStatus{}.SwaggerDoc()["podIP"]),
	wideCol("Node", "string", corev1.PodSpec{}.SwaggerDoc()["nodeName"]),
	wideCol("Nominated Node", "string", corev1.PodStatus{}.SwaggerDoc()["nominatedNodeName"]),
	wideCol("Readiness Gates", "string", corev1.PodSpec{}.SwaggerDoc()["readinessGates"]),
}

// NewPodTableConvertor prints pods as NAME READY STATUS RESTARTS AGE, wide
// IP NODE NOMINATED NODE READINESS GATES.
func NewPodTableConvertor() *Convertor[*corev1.Pod] {
	return New(podColumns, podRow).WithConditions(podConditions)
}

func podConditions(pod *corev1.Pod) []metav1.TableRowCondition {
	switch pod.Status.Phase {
	case corev1.PodSucceeded:
		return []metav1.TableRowCondition{{Type: metav1.RowCompleted, Status: metav1.ConditionTrue, Reason: string(pod.Status.Phase), Message: "The pod has completed successfully."}}
	case corev1.PodFailed:
		return []metav1.TableRowCondition{{Type: metav1.RowCompleted, Status: metav1.ConditionTrue, Reason: string(pod.Status.Phase), Message: "The pod failed."}}
	}
	return nil
}

func podRow(pod *corev1.Pod) []any {
	s := PodSummary(pod)
	restarts := strconv.Itoa(s.Restarts)
	if s.Restarts != 0 && !s.LastRestart.IsZero() {
		restarts = fmt.Sprintf("%d (%s ago)", s.Restarts, Age(s.LastRestart))
	}
	ip := "<none>"
	if len(pod.Status.PodIPs) > 0 && pod.Status.PodIPs[0].IP != "" {
		ip = pod.Status.PodIPs[0].IP
	} else if pod.Status.PodIP != "" {
		ip = pod.Status.PodIP
	}
	return []any{
		pod.Name,
		fmt.Sprintf("%d/%d", s.Ready, s.Total),
		s.Status,
		restarts,
		Age(pod.CreationTimestamp),
		ip,
		orNone(pod.Spec.NodeName),
		orNone(pod.Status.NominatedNodeName),
		readinessGates(pod),
	}
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

func readinessGates(pod *corev1.Pod) string {
	if len(pod.Spec.ReadinessGates) == 0 {
		return "<none>"
	}
	met := 0
	for _, g := range pod.Spec.ReadinessGates {
		for _, c := range pod.Status.Conditions {
			if c.Type == g.ConditionType {
				if c.Status == corev1.ConditionTrue {
					met++
				}
				break
			}
		}
	}
	return fmt.Sprintf("%d/%d", met, len(pod.Spec.ReadinessGates))
}

// PodStatusSummary is what the pod table shows about a pod's state.
type PodStatusSummary struct {
	// Ready and Total make up the READY column: ready containers (including
	// started sidecars) out of regular containers plus sidecars.
	Ready, Total int
	// Status is the STATUS column, e.g. Running, Init:0/1, CrashLoopBackOff,
	// Completed, Terminating.
	Status string
	// Restarts counts container restarts, and LastRestart is when the most
	// recent one ended (zero if unknown); together the RESTARTS column.
	Restarts    int
	LastRestart metav1.Time
}

// PodSummary computes a pod's READY, STATUS and RESTARTS the way kubectl's
// pod printer does.
//
// The status starts as the phase (or status.reason, or SchedulingGated).
// Init containers are examined in order: the first one neither finished
// successfully nor running as a started sidecar decides an "Init:" status
// (Init:<reason>, Init:ExitCode:<n>, Init:Signal:<n>, or Init:<i>/<n>). Once
// initialization is over, the last container with a waiting or terminated
// reason decides (CrashLoopBackOff, ErrImagePull, Completed, Error,
// ExitCode:<n>...); a Completed pod with a container still running reads
// Running (or NotReady without the Ready condition). A pod being deleted
// reads Terminating (Unknown if its node was lost) unless it already
// finished.
func PodSummary(pod *corev1.Pod) PodStatusSummary {
	s := PodStatusSummary{Total: len(pod.Spec.Containers)}
	s.Status = string(pod.Status.Phase)
	if pod.Status.Reason != "" {
		s.Status = pod.Status.Reason
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonSchedulingGated {
			s.Status = corev1.PodReasonSchedulingGated
		}
	}

	sidecars := map[string]bool{}
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sidecars[c.Name] = true
			s.Total++
		}
	}

	var sidecarRestarts int
	var sidecarLastRestart metav1.Time
	initializing := false
	for i, cs := range pod.Status.InitContainerStatuses {
		s.Restarts += int(cs.RestartCount)
		later(&s.LastRestart, cs.LastTerminationState)
		if sidecars[cs.Name] {
			sidecarRestarts += int(cs.RestartCount)
			later(&sidecarLastRestart, cs.LastTerminationState)
		}
		term, wait := cs.State.Terminated, cs.State.Waiting
		switch {
		case term != nil && term.ExitCode == 0:
			continue
		case sidecars[cs.Name] && cs.Started != nil && *cs.Started:
			if cs.Ready {
				s.Ready++
			}
			continue
		case term != nil:
			s.Status = "Init:" + terminatedReason(term)
		case wait != nil && wait.Reason != "" && wait.Reason != "PodInitializing":
			s.Status = "Init:" + wait.Reason
		default:
			s.Status = fmt.Sprintf("Init:%d/%d", i, len(pod.Spec.InitContainers))
		}
		initializing = true
		break
	}

	if !initializing || podConditionTrue(pod, corev1.PodInitialized) {
		s.Restarts, s.LastRestart = sidecarRestarts, sidecarLastRestart
		running := false
		for i := len(pod.Status.ContainerStatuses) - 1; i >= 0; i-- {
			cs := pod.Status.ContainerStatuses[i]
			s.Restarts += int(cs.RestartCount)
			later(&s.LastRestart, cs.LastTerminationState)
			switch {
			case cs.State.Waiting != nil && cs.State.Waiting.Reason != "":
				s.Status = cs.State.Waiting.Reason
			case cs.State.Terminated != nil:
				s.Status = terminatedReason(cs.State.Terminated)
			case cs.Ready && cs.State.Running != nil:
				running = true
				s.Ready++
			}
		}
		if s.Status == "Completed" && running {
			s.Status = "NotReady"
			if podConditionTrue(pod, corev1.PodReady) {
				s.Status = "Running"
			}
		}
	}

	if pod.DeletionTimestamp != nil {
		switch {
		case pod.Status.Reason == nodeUnreachablePodReason:
			s.Status = "Unknown"
		case pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed:
			s.Status = "Terminating"
		}
	}
	return s
}

// terminatedReason is a terminated state's reason, or ExitCode:<n> /
// Signal:<n> when it gives none.
func terminatedReason(t *corev1.ContainerStateTerminated) string {
	switch {
	case t.Reason != "":
		return t.Reason
	case t.Signal != 0:
		return fmt.Sprintf("Signal:%d", t.Signal)
	default:
		return fmt.Sprintf("ExitCode:%d", t.ExitCode)
	}
}

// later moves *t forward to the end of the last termination, if later.
func later(t *metav1.Time, last corev1.ContainerState) {
	if last.Terminated != nil && t.Before(&last.Terminated.FinishedAt) {
		*t = last.Terminated.FinishedAt
	}
}

func podConditionTrue(pod *corev1.Pod, t corev1.PodConditionType) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}
