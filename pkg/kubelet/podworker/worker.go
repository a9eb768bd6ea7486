// Package podworker runs one pod on this node: a goroutine per pod that makes the sandbox and volumes,
// pulls images, runs init containers in order and then the containers, restarts them per the pod's
// restartPolicy with CrashLoopBackOff, runs their probes, stops them gracefully when the pod is
// deleted, and reports what it sees as the pod's status.
package podworker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/rayctl/rayctl/pkg/kubelet/devices"
	"github.com/rayctl/rayctl/pkg/kubelet/podenv"
	"github.com/rayctl/rayctl/pkg/kubelet/probe"
	"github.com/rayctl/rayctl/pkg/kubelet/status"
	"github.com/rayctl/rayctl/pkg/kubelet/volume"
	"github.com/rayctl/rayctl/pkg/runtime"
)

// Deps are what every pod worker of a kubelet shares.
type Deps struct {
	// NodeName is this node's name.
	NodeName string
	// HostIP is the node's IP, reported as the pods' hostIP.
	HostIP string
	// Runtime runs the containers.
	Runtime runtime.Runtime
	// Client reads config maps and secrets and deletes finished pods.
	Client kubernetes.Interface
	// Recorder records the kubelet's events.
	Recorder record.EventRecorder
	// Status writes pod statuses.
	Status *status.Manager
	// Sources looks up config maps and secrets for environments and volumes (the kubelet gives each
	// worker its own, which knows the pod it reads for).
	Sources podenv.Sources
	// PodsDir holds a directory per pod (<uid>/logs, <uid>/volumes).
	PodsDir string
	// ClusterDNS and ClusterDomain configure ClusterFirst pods' resolv.conf; HostDNS is the host's.
	ClusterDNS    []string
	ClusterDomain string
	HostDNS       runtime.DNSConfig
	// Allocatable is the node's allocatable resources (downward API defaults).
	Allocatable corev1.ResourceList
	// CrashBackoff paces container restarts and image pulls.
	CrashBackoff BackoffConfig
	// Prober runs probes.
	Prober *probe.Prober
	// ResyncPeriod is how often a pod is synced without a reason (config maps, retries).
	ResyncPeriod time.Duration
	// APIServer is where containers reach the API server (their KUBERNETES_SERVICE_* variables).
	APIServer *podenv.APIServer
	// Devices hands out the node's accelerators (nil: none).
	Devices *devices.Manager
}

// retryDelay is how soon a failed step (sandbox, volumes, config) is tried again.
const retryDelay = 2 * time.Second

// Worker runs one pod. Create it with New, feed it pod updates with Update, and wake it when its
// containers change with Wake.
type Worker struct {
	deps *Deps
	uid  types.UID
	wake chan struct{}
	done chan struct{}

	mu        sync.Mutex
	pod       *corev1.Pod
	gone      bool
	logs      map[string]LogRef
	network   *Network // nil while the pod has no sandbox
	finished  bool
	probeRes  map[string]map[probe.Kind]probe.Result // by container id
	probeStop map[string]context.CancelFunc          // by container id

	// Owned by the run goroutine.
	sandbox *runtime.Sandbox
	// sandboxChecked says the sandbox was made (or made again) by this worker: one adopted from the
	// runtime after a restart is run once more (RunSandbox returns it as it is, or rebuilds what is gone
	// of it, such as the network namespace of a rootless rayctl that ended).
	sandboxChecked bool
	volumes        volume.Paths
	// volumesRenew is when the volumes are set up again, to renew their service-account tokens.
	volumesRenew time.Time
	containers   map[string]*containerRecord
	terminal     bool
	tornDown     bool
	startTime    *metav1.Time
	stale        []string // container ids to remove at the next sync
	logger       klog.Logger
}

// containerRecord is what the worker knows of one container of the pod.
type containerRecord struct {
	current  *runtime.ContainerStatus
	previous *runtime.ContainerStatus
	// waiting says why no (new) attempt runs yet; nil when none is pending.
	waiting   *corev1.ContainerStateWaiting
	crash     backoff
	pull      backoff
	pullError string
	imageID   string
	// backoffReported is the finish time of the attempt whose BackOff event was recorded.
	backoffReported time.Time
}

// LogRef locates a container's current and previous log files.
type LogRef struct {
	// ContainerID and LogPath are the current attempt's; Running says whether it still runs.
	ContainerID, LogPath string
	Running              bool
	// PreviousLogPath is the log of the attempt before, empty if there was none.
	PreviousLogPath string
}

// New returns a worker for pod, seeded with the runtime's sandbox and containers of that pod when
// re-adopting after a restart (both may be nil).
func New(deps *Deps, pod *corev1.Pod, sandbox *runtime.Sandbox, adopted []*runtime.ContainerStatus) *Worker {
	w := &Worker{
		deps:       deps,
		uid:        pod.UID,
		wake:       make(chan struct{}, 1),
		done:       make(chan struct{}),
		pod:        pod,
		logs:       map[string]LogRef{},
		probeRes:   map[string]map[probe.Kind]probe.Result{},
		probeStop:  map[string]context.CancelFunc{},
		sandbox:    sandbox,
		containers: map[string]*containerRecord{},
		logger:     klog.Background().WithValues("pod", klog.KObj(pod), "podUID", pod.UID),
	}
	if pod.Status.StartTime != nil {
		st := *pod.Status.StartTime
		w.startTime = &st
	}
	// A pod that already finished is never started again.
	w.terminal = isTerminal(pod.Status.Phase)
	byName := map[string][]*runtime.ContainerStatus{}
	for _, c := range adopted {
		_, name, _ := Identity(c)
		byName[name] = append(byName[name], c)
	}
	for name, list := range byName {
		sort.Slice(list, func(i, j int) bool {
			_, _, a := Identity(list[i])
			_, _, b := Identity(list[j])
			return a > b
		})
		if spec, _ := containerSpec(pod, name); spec == nil {
			for _, c := range list {
				w.removeLater(c.ID)
			}
			continue
		}
		r := &containerRecord{current: list[0]}
		if len(list) > 1 {
			r.previous = list[1]
		}
		w.containers[name] = r
		// Older attempts and containers the spec no longer names are removed by the first sync.
		for _, extra := range list[min(2, len(list)):] {
			w.removeLater(extra.ID)
		}
	}
	return w
}

func (w *Worker) removeLater(id string) { w.stale = append(w.stale, id) }

// UID returns the pod's UID.
func (w *Worker) UID() types.UID { return w.uid }

// Update hands the worker the pod's latest version and wakes it.
func (w *Worker) Update(pod *corev1.Pod) {
	w.mu.Lock()
	w.pod = pod
	w.mu.Unlock()
	w.Wake()
}

// Gone tells the worker its pod no longer exists in the API: it stops and removes everything.
func (w *Worker) Gone() {
	w.mu.Lock()
	w.gone = true
	w.mu.Unlock()
	w.Wake()
}

// Wake asks for a sync soon.
func (w *Worker) Wake() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Done is closed when the worker has finished (its pod is gone and cleaned up, or ctx ended).
func (w *Worker) Done() <-chan struct{} { return w.done }

// Logs returns where the named container's logs are.
func (w *Worker) Logs(container string) (LogRef, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ref, ok := w.logs[container]
	return ref, ok
}

// Network is how a pod's sandbox is reached.
type Network struct {
	// NetNSPath is the sandbox's network namespace, empty when it shares the host's.
	NetNSPath string
}

// Network returns the network of the pod's sandbox; false while the pod has none.
func (w *Worker) Network() (Network, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.network == nil {
		return Network{}, false
	}
	return *w.network, true
}

// publishSandbox makes the run goroutine's sandbox visible to Network.
func (w *Worker) publishSandbox() {
	var n *Network
	if w.sandbox != nil {
		n = &Network{NetNSPath: w.sandbox.NetNSPath}
	}
	w.mu.Lock()
	w.network = n
	w.mu.Unlock()
}

// Pod returns the pod as last handed to the worker.
func (w *Worker) Pod() *corev1.Pod {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pod
}

// Run syncs the pod until it is gone and cleaned up, or ctx ends (then containers keep running, to be
// re-adopted by the next kubelet).
func (w *Worker) Run(ctx context.Context) {
	defer close(w.done)
	defer w.stopAllProbes()
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	for {
		next, finished := w.sync(ctx)
		if finished {
			return
		}
		if next <= 0 || next > w.deps.ResyncPeriod {
			next = w.deps.ResyncPeriod
		}
		timer.Reset(next)
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
		case <-timer.C:
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

func (w *Worker) snapshot() (*corev1.Pod, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pod, w.gone
}

// podDir is the pod's own directory.
func (w *Worker) podDir() string { return filepath.Join(w.deps.PodsDir, string(w.uid)) }

// sync makes one pass: it returns how soon it wants the next and whether the worker is finished.
func (w *Worker) sync(ctx context.Context) (time.Duration, bool) {
	pod, gone := w.snapshot()
	w.refresh(ctx)
	w.removeStale(ctx)
	if gone {
		if err := w.teardown(ctx, 0); err != nil {
			w.logger.Error(err, "cleaning up a pod gone from the API")
			return retryDelay, false
		}
		w.deps.Status.Forget(w.uid)
		return 0, true
	}
	if pod.DeletionTimestamp != nil {
		return w.terminate(ctx, pod), false
	}
	if w.terminal {
		// The final status was written when the pod finished; nothing changes after that.
		w.stopAllProbes()
		if !isTerminal(pod.Status.Phase) {
			w.writeStatus(ctx, pod)
		}
		return 0, false
	}
	next := w.syncRunning(ctx, pod)
	st := w.writeStatus(ctx, pod)
	if isTerminal(st.Phase) {
		w.terminal = true
		w.stopAllProbes()
		w.stopRunning(ctx, pod, gracePeriod(pod))
	}
	return next, false
}

// refresh re-reads the runtime's view of the worker's containers.
func (w *Worker) refresh(ctx context.Context) {
	for name, r := range w.containers {
		for _, p := range []**runtime.ContainerStatus{&r.current, &r.previous} {
			if *p == nil {
				continue
			}
			st, err := w.deps.Runtime.ContainerStatus(ctx, (*p).ID)
			switch {
			case err == nil:
				*p = st
			case errors.Is(err, runtime.ErrNotFound):
				*p = nil
			default:
				w.logger.Error(err, "reading container status", "container", name)
			}
		}
		if r.current == nil && r.previous != nil {
			r.current, r.previous = r.previous, nil
		}
	}
	w.publishLogs()
}

func (w *Worker) publishLogs() {
	logs := map[string]LogRef{}
	for name, r := range w.containers {
		if r.current == nil {
			continue
		}
		ref := LogRef{ContainerID: r.current.ID, LogPath: r.current.LogPath, Running: r.current.State == runtime.StateRunning}
		if r.previous != nil {
			ref.PreviousLogPath = r.previous.LogPath
		}
		logs[name] = ref
	}
	w.mu.Lock()
	w.logs = logs
	w.mu.Unlock()
}

func (w *Worker) removeStale(ctx context.Context) {
	ids := w.stale
	w.stale = nil
	for _, id := range ids {
		_ = w.deps.Runtime.StopContainer(ctx, id, 0)
		if err := w.deps.Runtime.RemoveContainer(ctx, id); err != nil && !errors.Is(err, runtime.ErrNotFound) {
			w.logger.Error(err, "removing an old container", "id", id)
		}
	}
}

func isTerminal(p corev1.PodPhase) bool { return p == corev1.PodSucceeded || p == corev1.PodFailed }

// gracePeriod is the pod's deletion grace period, else its spec's, else 30s.
func gracePeriod(pod *corev1.Pod) time.Duration {
	switch {
	case pod.DeletionGracePeriodSeconds != nil:
		return time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
	case pod.Spec.TerminationGracePeriodSeconds != nil:
		return time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	return 30 * time.Second
}

// terminate stops a pod being deleted, reports its final status, removes its containers and sandbox
// and confirms the deletion to the API server (grace period 0, guarded by the pod's UID).
func (w *Worker) terminate(ctx context.Context, pod *corev1.Pod) time.Duration {
	if !w.tornDown {
		w.stopAllProbes()
		w.stopRunning(ctx, pod, gracePeriod(pod))
		w.refresh(ctx)
		w.terminal = true
		w.writeStatus(ctx, pod)
		if err := w.teardown(ctx, 0); err != nil {
			w.logger.Error(err, "removing a deleted pod's containers")
			return retryDelay
		}
		w.tornDown = true
	}
	uid := pod.UID
	err := w.deps.Client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: new(int64),
		Preconditions:      &metav1.Preconditions{UID: &uid},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		w.logger.Error(err, "confirming the pod's deletion")
		return retryDelay
	}
	return 0
}

// stopRunning stops every running or created container of the pod within grace, concurrently,
// running preStop exec hooks first and recording Killing events.
func (w *Worker) stopRunning(ctx context.Context, pod *corev1.Pod, grace time.Duration) {
	var wg sync.WaitGroup
	for name, r := range w.containers {
		if r.current == nil || r.current.State == runtime.StateExited {
			continue
		}
		spec, _ := containerSpec(pod, name)
		id := r.current.ID
		wg.Go(func() {
			w.killContainer(ctx, pod, spec, name, id, grace, fmt.Sprintf("Stopping container %s", name))
		})
	}
	wg.Wait()
	w.refresh(ctx)
}

func (w *Worker) killContainer(ctx context.Context, pod *corev1.Pod, spec *corev1.Container, name, id string, grace time.Duration, message string) {
	w.event(pod, name, corev1.EventTypeNormal, "Killing", message)
	start := time.Now()
	if spec != nil && spec.Lifecycle != nil && spec.Lifecycle.PreStop != nil && spec.Lifecycle.PreStop.Exec != nil && grace > 0 {
		hctx, cancel := context.WithTimeout(ctx, grace)
		code, err := w.deps.Runtime.Exec(hctx, id, spec.Lifecycle.PreStop.Exec.Command, runtime.ExecIO{})
		cancel()
		if err != nil || code != 0 {
			w.event(pod, name, corev1.EventTypeWarning, "FailedPreStopHook", fmt.Sprintf("PreStopHook failed: exit code %d %v", code, errOrEmpty(err)))
		}
		grace -= time.Since(start)
		if grace < 0 {
			grace = 0
		}
	}
	if err := w.deps.Runtime.StopContainer(ctx, id, grace); err != nil && !errors.Is(err, runtime.ErrNotFound) {
		w.logger.Error(err, "stopping container", "container", name)
	}
}

func errOrEmpty(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// teardown stops and removes every container and the sandbox, and the pod's volumes.
func (w *Worker) teardown(ctx context.Context, grace time.Duration) error {
	w.stopAllProbes()
	for _, r := range w.containers {
		for _, c := range []*runtime.ContainerStatus{r.current, r.previous} {
			if c == nil {
				continue
			}
			if c.State != runtime.StateExited {
				if err := w.deps.Runtime.StopContainer(ctx, c.ID, grace); err != nil && !errors.Is(err, runtime.ErrNotFound) {
					return err
				}
			}
			if err := w.deps.Runtime.RemoveContainer(ctx, c.ID); err != nil && !errors.Is(err, runtime.ErrNotFound) {
				return err
			}
		}
	}
	w.containers = map[string]*containerRecord{}
	w.publishLogs()
	if err := w.deps.Runtime.RemoveSandbox(ctx, string(w.uid)); err != nil && !errors.Is(err, runtime.ErrNotFound) {
		return err
	}
	w.sandbox = nil
	w.publishSandbox()
	if err := volume.Teardown(filepath.Join(w.podDir(), "volumes")); err != nil {
		return err
	}
	w.volumes = nil
	return os.RemoveAll(w.podDir())
}

// Cleanup removes the runtime's containers and sandbox of a pod the kubelet has no worker for (its pod
// is gone from the API), and the pod's directory. With podUID "" (containers that name no pod) it
// removes only the containers.
func Cleanup(ctx context.Context, rt runtime.Runtime, podsDir, podUID string, containers []*runtime.ContainerStatus) error {
	for _, c := range containers {
		if err := rt.StopContainer(ctx, c.ID, 0); err != nil && !errors.Is(err, runtime.ErrNotFound) {
			return err
		}
		if err := rt.RemoveContainer(ctx, c.ID); err != nil && !errors.Is(err, runtime.ErrNotFound) {
			return err
		}
	}
	if podUID == "" {
		return nil
	}
	if err := rt.RemoveSandbox(ctx, podUID); err != nil && !errors.Is(err, runtime.ErrNotFound) {
		return err
	}
	dir := filepath.Join(podsDir, podUID)
	if err := volume.Teardown(filepath.Join(dir, "volumes")); err != nil {
		return err
	}
	return os.RemoveAll(dir)
}

// event records an event about the pod, or about one of its containers when container is set.
func (w *Worker) event(pod *corev1.Pod, container, eventType, reason, message string) {
	if w.deps.Recorder == nil {
		return
	}
	ref := &corev1.ObjectReference{
		Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID,
		ResourceVersion: pod.ResourceVersion,
	}
	if container != "" {
		if _, init := containerSpec(pod, container); init {
			ref.FieldPath = fmt.Sprintf("spec.initContainers{%s}", container)
		} else {
			ref.FieldPath = fmt.Sprintf("spec.containers{%s}", container)
		}
	}
	w.deps.Recorder.Event(ref, eventType, reason, message)
}

// containerSpec finds a container of the pod by name and says whether it is an init container.
func containerSpec(pod *corev1.Pod, name string) (*corev1.Container, bool) {
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			return &pod.Spec.InitContainers[i], true
		}
	}
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i], false
		}
	}
	return nil, false
}
