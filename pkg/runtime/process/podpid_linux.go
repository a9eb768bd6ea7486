package process

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rayctl/rayctl/pkg/selfpages"
)

// pauseArg0 is argv[0] of the process that holds a pod's shared PID
// namespace (spec.shareProcessNamespace) as its PID 1, as Kubernetes' pause
// container does.
const pauseArg0 = "rayctl-pod-pause"

func init() {
	if len(os.Args) == 1 && os.Args[0] == pauseArg0 {
		podPause()
	}
}

// podPause reaps the orphans of the pod's containers until SIGTERM or SIGINT.
func podPause() {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, unix.SIGTERM, unix.SIGINT)
	_, _ = selfpages.Drop() // the binary's start-up pages; what it runs now faults back in
	go func() {
		for {
			var ws unix.WaitStatus
			if _, err := unix.Wait4(-1, &ws, 0, nil); err != nil && err != unix.EINTR {
				time.Sleep(time.Second) // no children yet
			}
		}
	}()
	<-sigs
	os.Exit(0)
}

// podHolder identifies a pod's PID namespace holder, in
// <state dir>/sandboxes/<pod uid>.json.
type podHolder struct {
	Pid        int
	StartTicks uint64
}

func (r *Runtime) holderPath(podUID string) string {
	return filepath.Join(r.dir, "sandboxes", podUID+".json")
}

// startPodPIDNS starts the pod's PID namespace holder unless it runs.
func (r *Runtime) startPodPIDNS(podUID string) error {
	if h, err := r.loadHolder(podUID); err == nil && sameProcess(h.Pid, h.StartTicks) {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(r.holderPath(podUID)), 0o755); err != nil {
		return err
	}
	cmd := &exec.Cmd{Path: "/proc/self/exe", Args: []string{pauseArg0},
		SysProcAttr: &syscall.SysProcAttr{Setsid: true, Cloneflags: unix.CLONE_NEWPID}}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("pod %s's PID namespace: %w", podUID, err)
	}
	go func() { _ = cmd.Wait() }()
	ticks, _ := startTicks(cmd.Process.Pid)
	b, _ := json.Marshal(podHolder{Pid: cmd.Process.Pid, StartTicks: ticks})
	if err := os.WriteFile(r.holderPath(podUID), b, 0o644); err != nil {
		_ = cmd.Process.Kill()
		return err
	}
	return nil
}

func (r *Runtime) loadHolder(podUID string) (*podHolder, error) {
	b, err := os.ReadFile(r.holderPath(podUID))
	if err != nil {
		return nil, err
	}
	h := &podHolder{}
	return h, json.Unmarshal(b, h)
}

// podPIDNS is the path of the pod's shared PID namespace, "" when the pod
// has none; an error when its holder is gone.
func (r *Runtime) podPIDNS(podUID string) (string, error) {
	h, err := r.loadHolder(podUID)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if !sameProcess(h.Pid, h.StartTicks) && r.endWithRuntime {
		// New or Close killed it (see killPodPIDNSs): the pod's containers went with it, so a
		// new namespace loses nobody.
		if err := r.startPodPIDNS(podUID); err != nil {
			return "", err
		}
		if h, err = r.loadHolder(podUID); err != nil {
			return "", err
		}
	} else if !sameProcess(h.Pid, h.StartTicks) {
		return "", fmt.Errorf("pod %s's shared PID namespace is gone", podUID)
	}
	return fmt.Sprintf("/proc/%d/ns/pid", h.Pid), nil
}

// killPodPIDNSs kills every pod's PID namespace holder, leaving its record,
// for ContainersEndWithRuntime: a rootless rayctl cannot enter a namespace an
// earlier one made, so podPIDNS starts a new one when a container starts.
func (r *Runtime) killPodPIDNSs() {
	paths, _ := filepath.Glob(filepath.Join(r.dir, "sandboxes", "*.json"))
	for _, p := range paths {
		podUID := strings.TrimSuffix(filepath.Base(p), ".json")
		if h, err := r.loadHolder(podUID); err == nil && sameProcess(h.Pid, h.StartTicks) {
			killLeftover(h.Pid, h.StartTicks)
		}
	}
}

// stopPodPIDNS kills the pod's PID namespace holder, and so every process
// left in the namespace.
func (r *Runtime) stopPodPIDNS(podUID string) error {
	h, err := r.loadHolder(podUID)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err == nil && sameProcess(h.Pid, h.StartTicks) {
		_ = unix.Kill(h.Pid, unix.SIGKILL)
		for i := 0; i < 200 && sameProcess(h.Pid, h.StartTicks); i++ {
			time.Sleep(25 * time.Millisecond)
		}
	}
	return os.Remove(r.holderPath(podUID))
}
