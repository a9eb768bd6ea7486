package podworker

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/rayctl/rayctl/pkg/kubelet/probe"
	"github.com/rayctl/rayctl/pkg/runtime"
)

// ensureProbes starts the probe workers of a running container once: the startup probe first, and
// readiness and liveness only after it has succeeded (or when there is none).
func (w *Worker) ensureProbes(pod *corev1.Pod, c *corev1.Container, st *runtime.ContainerStatus) {
	w.mu.Lock()
	defer w.mu.Unlock()
	res, ok := w.probeRes[st.ID]
	if !ok {
		res = map[probe.Kind]probe.Result{}
		w.probeRes[st.ID] = res
	}
	started := c.StartupProbe == nil || res[probe.Startup] == probe.Success
	specs := map[probe.Kind]*corev1.Probe{}
	if c.StartupProbe != nil {
		specs[probe.Startup] = c.StartupProbe
	}
	if started {
		if c.ReadinessProbe != nil {
			specs[probe.Readiness] = c.ReadinessProbe
		}
		if c.LivenessProbe != nil {
			specs[probe.Liveness] = c.LivenessProbe
		}
	}
	podIP, netns := "", ""
	if w.sandbox != nil {
		podIP, netns = w.sandbox.IP, w.sandbox.NetNSPath
	}
	for kind, spec := range specs {
		key := st.ID + "/" + string(kind)
		if _, running := w.probeStop[key]; running {
			continue
		}
		ctx, cancel := context.WithCancel(context.Background())
		w.probeStop[key] = cancel
		id, name := st.ID, c.Name
		worker := &probe.Worker{
			Kind: kind, Spec: spec, StartedAt: st.StartedAt, Prober: w.deps.Prober,
			Target: probe.Target{ContainerID: id, PodIP: podIP, NetNSPath: netns, Container: c},
			OnResult: func(r probe.Result) {
				w.mu.Lock()
				if m, ok := w.probeRes[id]; ok {
					m[kind] = r
				}
				w.mu.Unlock()
				w.Wake()
			},
			OnFailedAttempt: func(msg string) {
				w.event(pod, name, corev1.EventTypeWarning, "Unhealthy", string(kind)+" probe failed: "+msg)
			},
		}
		go worker.Run(ctx)
	}
}

// probeResult returns a container's current verdict of one probe kind.
func (w *Worker) probeResult(id string, kind probe.Kind) probe.Result {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.probeRes[id][kind]
}

// probeFailed reports whether the liveness or startup probe of a container has failed.
func (w *Worker) probeFailed(id string) (probe.Kind, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, k := range []probe.Kind{probe.Liveness, probe.Startup} {
		if w.probeRes[id][k] == probe.Failure {
			return k, true
		}
	}
	return "", false
}

// stopProbes stops the probe workers of a container and forgets their verdicts.
func (w *Worker) stopProbes(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, k := range []probe.Kind{probe.Startup, probe.Readiness, probe.Liveness} {
		key := id + "/" + string(k)
		if cancel, ok := w.probeStop[key]; ok {
			cancel()
			delete(w.probeStop, key)
		}
	}
	delete(w.probeRes, id)
}

func (w *Worker) stopAllProbes() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for key, cancel := range w.probeStop {
		cancel()
		delete(w.probeStop, key)
	}
}
