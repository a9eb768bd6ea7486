// Package datadir owns rayctl's data directory: where it is, who may read it, which process holds it,
// and the small state file through which commands such as `rayctl status` and `rayctl down` find the
// running instance.
package datadir

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/rayctl/rayctl/pkg/apiserver/pki"
)

// Default returns $RAYCTL_HOME, else ~/.rayctl.
func Default() string {
	if d := os.Getenv("RAYCTL_HOME"); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ".rayctl"
	}
	return filepath.Join(home, ".rayctl")
}

// Dir is one data directory.
type Dir struct {
	// Path is the directory's absolute path.
	Path string
	lock *os.File
}

// Open makes path absolute and creates it readable by its owner only.
func Open(path string) (*Dir, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return nil, err
	}
	if err := os.Chmod(abs, 0o700); err != nil {
		return nil, err
	}
	return &Dir{Path: abs}, nil
}

// Join returns a path inside the directory.
func (d *Dir) Join(elem ...string) string { return filepath.Join(append([]string{d.Path}, elem...)...) }

// Kubeconfig is the admin kubeconfig's path.
func (d *Dir) Kubeconfig() string { return d.Join("kubeconfig") }

// Lock takes the directory for this process. It fails at once, naming the holder, when another rayctl
// holds it. The lock is the kernel's, so it goes with the process however the process ends.
func (d *Dir) Lock() error {
	f, err := os.OpenFile(d.Join("rayctl.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		holder := "another process"
		if st, err := d.ReadState(); err == nil && st.PID > 0 {
			holder = "rayctl (pid " + strconv.Itoa(st.PID) + ")"
		} else if b, err := os.ReadFile(d.Join("rayctl.pid")); err == nil {
			holder = "rayctl (pid " + strings.TrimSpace(string(b)) + ")"
		}
		return fmt.Errorf("data dir %s is in use by %s; stop it with `rayctl down --data-dir %s` or pick another --data-dir", d.Path, holder, d.Path)
	}
	d.lock = f
	return pki.WriteFileAtomic(d.Join("rayctl.pid"), []byte(strconv.Itoa(os.Getpid())+"\n"))
}

// Unlock releases the directory and removes the pid and state files.
func (d *Dir) Unlock() {
	os.Remove(d.Join("rayctl.pid"))
	os.Remove(d.Join("rayctl.state"))
	if d.lock != nil {
		d.lock.Close()
		d.lock = nil
	}
}

// initializedMarker is the file that records that the data dir's etcd has held data.
const initializedMarker = "initialized"

// MarkInitialized records, once, that this data dir's etcd holds the cluster's objects, so that a later
// start that finds etcd's directory gone refuses to begin with an empty store.
func (d *Dir) MarkInitialized() error {
	if _, err := os.Stat(d.Join(initializedMarker)); err == nil {
		return nil
	}
	msg := "etcd in this data dir holds the cluster's objects (rayctl up refuses to start if etcd/ goes missing).\n"
	return pki.WriteFileAtomic(d.Join(initializedMarker), []byte(msg))
}

// Initialized reports whether this data dir's etcd held data before: MarkInitialized was called, or (for
// data dirs older than the marker) there is a kubeconfig, which only a start that got ready writes.
func (d *Dir) Initialized() bool {
	for _, f := range []string{initializedMarker, "kubeconfig"} {
		if _, err := os.Stat(d.Join(f)); err == nil {
			return true
		}
	}
	return false
}

// State describes a running, ready instance.
type State struct {
	// PID is the process id of `rayctl up`.
	PID int `json:"pid"`
	// Server is the API server's URL.
	Server string `json:"server"`
	// Runtime names the container runtime in use.
	Runtime string `json:"runtime,omitempty"`
	// Sandbox says how the node holds its pods (controlplane.Sandbox's Why).
	Sandbox string `json:"sandbox,omitempty"`
	// ContainerdSocket is the containerd socket the runtime uses, when it is containerd.
	ContainerdSocket string `json:"containerdSocket,omitempty"`
	// ReadyMillis is how long start-up took.
	ReadyMillis int64 `json:"readyMillis"`
	// Components maps each component to its start-up time in milliseconds.
	Components map[string]int64 `json:"components,omitempty"`
}

// ReadyLine is the line `rayctl up` prints, once it has written s, to say it is ready: "ready in N ms".
func (s State) ReadyLine() string { return fmt.Sprintf("ready in %d ms", s.ReadyMillis) }

// WriteState records that the instance is ready.
func (d *Dir) WriteState(s State) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return pki.WriteFileAtomic(d.Join("rayctl.state"), b)
}

// ErrNotRunning means no instance has recorded itself ready in this directory.
var ErrNotRunning = errors.New("rayctl is not running")

// ReadState returns the running instance's state, or ErrNotRunning.
func (d *Dir) ReadState() (*State, error) {
	s, err := d.LastState()
	if err != nil {
		return nil, err
	}
	if s.PID <= 0 || syscall.Kill(s.PID, 0) != nil {
		return nil, ErrNotRunning
	}
	return s, nil
}

// LastState returns the state file as the last instance to get ready wrote it, whether or not that
// instance still runs (one killed leaves it behind), or ErrNotRunning when there is none.
func (d *Dir) LastState() (*State, error) {
	b, err := os.ReadFile(d.Join("rayctl.state"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, ErrNotRunning
	}
	if err != nil {
		return nil, err
	}
	s := &State{}
	if err := json.Unmarshal(b, s); err != nil {
		return nil, err
	}
	return s, nil
}

// NodeConfig is how this data dir's node runs pods; it outlives the process so that `rayctl down --purge`
// and `rayctl image` find the same runtime and network.
type NodeConfig struct {
	// Runtime is the runtime the node chose (containerd, process, fake), or the --runtime asked for
	// (auto too) when it stopped before choosing.
	Runtime string `json:"runtime"`
	// PodCIDR and Bridge are the pod network's range and bridge.
	PodCIDR string `json:"podCIDR"`
	Bridge  string `json:"bridge"`
}

// WriteNodeConfig records c.
func (d *Dir) WriteNodeConfig(c NodeConfig) error {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	return pki.WriteFileAtomic(d.Join("node.json"), b)
}

// ReadNodeConfig returns the recorded node configuration, or ok=false when none was recorded.
func (d *Dir) ReadNodeConfig() (NodeConfig, bool) {
	var c NodeConfig
	b, err := os.ReadFile(d.Join("node.json"))
	if err != nil || json.Unmarshal(b, &c) != nil {
		return c, false
	}
	return c, true
}
