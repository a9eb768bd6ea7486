package main

// How the suites start `rayctl up`: as root, or as an ordinary user (rootless), with the flags of a mode.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/rayctl/rayctl/pkg/instance"
)

// upMode is one way a suite runs `rayctl up`.
type upMode struct {
	name string              // in the tables
	args []string            // `rayctl up` flags
	user *syscall.Credential // nil: root
}

// laptopUser is the ordinary user the rootless modes run `rayctl up` as, as a developer runs it on a
// laptop: uid 4242 (rayctl-laptop on the bench machine; no account is needed).
var laptopUser = &syscall.Credential{Uid: 4242, Gid: 4242}

// The process runtime with raysim for Ray's images, as root and rootless: every other image runs the
// host's program of its command (python3 for the network suites' clients and servers).
var (
	processRoot     = upMode{name: "process", args: []string{"--runtime", "process", "--ray", "sim"}}
	processRootless = upMode{name: "process, rootless (uid 4242)", args: processRoot.args, user: laptopUser}
)

// startMode runs `rayctl up` on a fresh data dir as mode says and waits until it is ready. done stops
// it and removes what it left; call it also when err is set.
func startMode(rayctl, suite string, mode upMode) (up *instance.Process, dir string, done func(), err error) {
	dir, err = os.MkdirTemp("", "rayctl-bench-"+suite+"-")
	if err != nil {
		return nil, "", func() {}, err
	}
	remove := func() { removeInstance(rayctl, dir) }
	if mode.user != nil {
		up, remove, err = startUpAs(rayctl, dir, mode.user, mode.args...)
	} else {
		up, err = startUp(rayctl, dir, mode.args...)
	}
	done = func() {
		if up != nil {
			up.Stop(time.Minute)
		}
		remove()
	}
	return up, dir, done, err
}

// who says how m runs rayctl, for the tables: "root, process runtime", "rootless (uid 4242), process runtime".
func (m upMode) who() string {
	rt := "process runtime"
	if i := slices.Index(m.args, "--runtime"); i >= 0 && i+1 < len(m.args) {
		rt = m.args[i+1] + " runtime"
	}
	if m.user != nil {
		return fmt.Sprintf("rootless (uid %d), %s", m.user.Uid, rt)
	}
	return "root, " + rt
}

// upInstance is a running `rayctl up` of a mode, with a client and a namespace for a suite's pods.
type upInstance struct {
	mode upMode
	up   *instance.Process
	dir  string
	kube kubernetes.Interface
}

// startModes starts a `rayctl up` in each mode, one after another, and makes namespace ns in each, so
// that a suite can measure them in turns (the machine's other load then falls on all alike). stop stops
// them all and removes what they left; call it also when err is set.
func startModes(ctx context.Context, rayctl, suite, ns string, modes []upMode) (insts []*upInstance, stop func(), err error) {
	var dones []func()
	stop = func() {
		for i := len(dones) - 1; i >= 0; i-- {
			dones[i]()
		}
	}
	for _, m := range modes {
		up, dir, done, err := startMode(rayctl, suite, m)
		dones = append(dones, done)
		if err != nil {
			return nil, stop, fmt.Errorf("rayctl up, %s: %w", m.who(), err)
		}
		kube, _, err := clients(up, 50, 100)
		if err == nil {
			err = podNamespace(ctx, kube, ns)
		}
		if err != nil {
			return nil, stop, fmt.Errorf("rayctl up, %s: %w", m.who(), err)
		}
		insts = append(insts, &upInstance{mode: m, up: up, dir: dir, kube: kube})
	}
	return insts, stop, nil
}

// line is what the instance's `rayctl up` printed on its start-up line for step (e.g. "egress").
func (u *upInstance) line(step string) string {
	for _, l := range u.up.Startup {
		if f := strings.Fields(l); len(f) > 0 && f[0] == step {
			return strings.TrimSpace(l)
		}
	}
	return "(no " + step + " line)"
}

// startUpAs runs `rayctl up --data-dir dir --port 0 args...` as the user cred names, as an ordinary user
// runs it (HOME is dir), from a copy of rayctl and raysim that user may read (the bench's may sit where it
// cannot), with a pod network of its own; dir becomes that user's. The cleanup returned, called once the
// instance has stopped, removes what it left (see removeUserInstance) and the copy.
func startUpAs(rayctl, dir string, cred *syscall.Credential, args ...string) (*instance.Process, func(), error) {
	bin, err := os.MkdirTemp("", "rayctl-bench-bin-")
	if err != nil {
		return nil, func() { os.RemoveAll(dir) }, err
	}
	cleanup := func() {
		removeUserInstance(filepath.Join(bin, "rayctl"), dir, cred)
		os.RemoveAll(bin)
	}
	for _, name := range []string{"rayctl", "raysim"} {
		b, err := os.ReadFile(filepath.Join(filepath.Dir(rayctl), name))
		if err != nil {
			return nil, cleanup, err
		}
		if err := os.WriteFile(filepath.Join(bin, name), b, 0o755); err != nil {
			return nil, cleanup, err
		}
	}
	if err := os.Chmod(bin, 0o755); err != nil {
		return nil, cleanup, err
	}
	if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
		return nil, cleanup, err
	}
	up, err := instance.Start(context.Background(), instance.Options{Binary: filepath.Join(bin, "rayctl"), DataDir: dir,
		Args: instance.OwnNetwork(append([]string{"--port", "0"}, args...)), Env: []string{"HOME=" + dir}, Credential: cred})
	return up, cleanup, err
}

// removeUserInstance is removeInstance for an instance an ordinary user ran: `rayctl down --purge` as that user.
func removeUserInstance(rayctl, dir string, cred *syscall.Credential) {
	cmd := exec.Command(rayctl, "down", "--purge", "--data-dir", dir)
	cmd.Env = append(os.Environ(), "HOME="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "rayctl down --purge (uid %d): %v\n%s", cred.Uid, err, out)
	}
	os.RemoveAll(dir)
}
