package kubelet

import (
	"context"
	"errors"
	"os"

	"github.com/rayctl/rayctl/pkg/kubelet/podworker"
	"github.com/rayctl/rayctl/pkg/runtime"
)

// Purged counts what Purge removed.
type Purged struct {
	// Containers and Sandboxes are what the runtime held; PodDirs the pod directories found.
	Containers, Sandboxes, PodDirs int
}

// Purge removes every pod from the node while no kubelet runs: each pod's containers, sandbox and
// directory under podsDir (volumes, logs), as the kubelet removes a pod that is gone from the API
// (podworker.Cleanup), whether the runtime or only its directory still knows the pod. It goes on past
// a pod it cannot remove and returns every error.
func Purge(ctx context.Context, rt runtime.Runtime, podsDir string) (Purged, error) {
	containers, err := rt.ListContainers(ctx)
	if err != nil {
		return Purged{}, err
	}
	sandboxes, err := rt.ListSandboxes(ctx)
	if err != nil {
		return Purged{}, err
	}
	dirs, _ := os.ReadDir(podsDir)
	pods := map[string][]*runtime.ContainerStatus{}
	for _, c := range containers {
		uid, _, _ := podworker.Identity(c)
		pods[uid] = append(pods[uid], c)
	}
	for _, sb := range sandboxes {
		pods[podworker.SandboxPodUID(sb)] = pods[podworker.SandboxPodUID(sb)]
	}
	for _, d := range dirs {
		pods[d.Name()] = pods[d.Name()]
	}
	var errs []error
	for uid, cs := range pods {
		errs = append(errs, podworker.Cleanup(ctx, rt, podsDir, uid, cs))
	}
	return Purged{Containers: len(containers), Sandboxes: len(sandboxes), PodDirs: len(dirs)}, errors.Join(errs...)
}
