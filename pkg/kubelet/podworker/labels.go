package podworker

import (
	"strconv"

	"github.com/rayctl/rayctl/pkg/runtime"
)

// Label keys the kubelet records on every sandbox and container it makes, so that after a restart it
// can tell which pod, container and attempt each one is (the same keys as the upstream kubelet's).
const (
	LabelPodUID        = "io.kubernetes.pod.uid"
	LabelPodName       = "io.kubernetes.pod.name"
	LabelPodNamespace  = "io.kubernetes.pod.namespace"
	LabelContainerName = "io.kubernetes.container.name"
	LabelAttempt       = "io.kubernetes.container.restartCount"
)

// Identity returns the pod UID, container name and attempt of a runtime container, from its status
// fields or, where the runtime left them empty, from its labels.
func Identity(c *runtime.ContainerStatus) (podUID, name string, attempt int) {
	podUID, name, attempt = c.PodUID, c.Name, c.Attempt
	if podUID == "" {
		podUID = c.Labels[LabelPodUID]
	}
	if name == "" {
		name = c.Labels[LabelContainerName]
	}
	if attempt == 0 {
		if n, err := strconv.Atoi(c.Labels[LabelAttempt]); err == nil {
			attempt = n
		}
	}
	return podUID, name, attempt
}

// SandboxPodUID returns the pod UID of a sandbox.
func SandboxPodUID(s *runtime.Sandbox) string {
	if s.PodUID != "" {
		return s.PodUID
	}
	return s.Labels[LabelPodUID]
}
