// Package selector picks the container runtime `rayctl up --runtime=…`
// names: containerd, process, fake, or auto, which takes a containerd socket
// that answers, else a private containerd when the binary is installed (run
// as root, or rootless inside rayctl's user namespace), else the process
// runtime. It also settles what runs Ray's images (`--ray=…`, see Plan): the
// host's Ray and raysim run on the process runtime, the images themselves on
// containerd, so auto takes the process runtime when the host's Ray runs them. It sits apart from package runtime
// because it imports the implementations, which import runtime.
package selector

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"time"

	ctrd "github.com/containerd/containerd/v2/client"

	"github.com/rayctl/rayctl/pkg/runtime"
	"github.com/rayctl/rayctl/pkg/runtime/containerd"
	"github.com/rayctl/rayctl/pkg/runtime/hostray"
	"github.com/rayctl/rayctl/pkg/runtime/network"
	"github.com/rayctl/rayctl/pkg/runtime/perpod"
	"github.com/rayctl/rayctl/pkg/runtime/process"
	"github.com/rayctl/rayctl/pkg/userns"
)

// Runtime names accepted by Select.
const (
	Auto       = "auto"
	Containerd = "containerd"
	Process    = "process"
	Fake       = "fake"
	// PerPod is what auto takes when the process runtime runs Ray's images (the host's Ray, or
	// raysim) and containerd can run: each pod on one of the two (package perpod), Ray's images on
	// the process runtime and every other image on containerd, all on one pod network. It is recorded
	// under this name (and may be asked for by it, e.g. by `rayctl down --purge`).
	PerPod = "containerd+process"
)

// What runs Ray's images (rayproject/ray…), as `rayctl up --ray=…` names it.
const (
	// RayAuto is the host's Ray when one is found, else the images themselves where containerd runs, else raysim.
	RayAuto = "auto"
	// RayHost is the host's Ray, on the process runtime; without one, rayctl refuses to start.
	RayHost = "host"
	// RayImage is the images themselves, pulled from their registry and run by containerd.
	RayImage = "image"
	// RaySim is raysim, rayctl's offline stand-in, on the process runtime.
	RaySim = "sim"
)

// DefaultSystemSocket is where a system containerd listens.
const DefaultSystemSocket = "/run/containerd/containerd.sock"

// Options says where the runtimes keep their state.
type Options struct {
	// DataDir is rayctl's data dir: a private containerd lives in
	// <DataDir>/containerd, the pod network's state in <DataDir>/network, the
	// process runtime's in <DataDir>/process. Required.
	DataDir string
	// SystemSocket is an existing containerd's socket to try first
	// (DefaultSystemSocket when empty; "-" skips it).
	SystemSocket string
	// Network sets the bridge and pod CIDR (its StateDir defaults to
	// <DataDir>/network; HostOnly is decided here).
	Network network.Config
	// RayBinary is raysim's executable for the process runtime (this rayctl
	// when empty).
	RayBinary string
	// Ray says what runs Ray's images: RayAuto (when empty), RayHost, RayImage or RaySim.
	Ray string
	// HostRay is the host's Ray, found or nil; the process runtime runs Ray's images on it when Ray
	// allows (nil: raysim stands in).
	HostRay *hostray.Ray
	// NewFake makes the fake runtime (rayctl passes fake.New), so this
	// package does not depend on it.
	NewFake func() (runtime.Runtime, error)
	// Logf, when set, is told what happens to a private containerd after
	// start-up: that it exited, and that it was restarted (or could not be).
	Logf func(format string, args ...any)
	// Rootless says that rayctl runs in a user namespace of its own (root there, an ordinary user on
	// the host): no system containerd is used (it would run pods as the host's root), a private one
	// runs in that namespace, and the process runtime's containers end with rayctl, whose namespaces
	// the next rayctl cannot enter.
	Rootless bool
	// Supervise tunes how a private containerd is restarted (defaults when
	// zero).
	Supervise containerd.SuperviseOptions

	// notFoundHint is the process runtime's Options.NotFoundHint.
	notFoundHint string
}

// Choice is the runtime picked and why.
type Choice struct {
	// Runtime is ready to use.
	Runtime runtime.Runtime
	// Name is "containerd", "process" or "fake".
	Name string
	// Ray is what runs Ray's images: RayHost, RayImage or RaySim (never RayAuto).
	Ray string
	// HostRay is the host's Ray when Ray is RayHost, else nil.
	HostRay *hostray.Ray
	// Reason says which and why, e.g. "containerd 1.6.20 (private, started in 140 ms)".
	Reason string
	// Address is the containerd socket in use (empty for other runtimes), for commands such as
	// `rayctl image load` that reach the running instance's containerd.
	Address string
	// Network is the pod network manager (nil for fake), for
	// `rayctl down --purge` (Cleanup, RemoveBridge).
	Network *network.Manager
	// Close closes the runtime and stops a private containerd. Containers
	// keep running in their shims and are re-adopted by the next start.
	Close func() error
	// Failed receives an error when a private containerd keeps dying and is
	// no longer restarted; nil for other runtimes (a nil channel never
	// receives).
	Failed <-chan error
}

// Select makes the runtime name asks for.
func Select(ctx context.Context, name string, opts Options) (*Choice, error) {
	if opts.DataDir == "" {
		return nil, errors.New("runtime: a data dir is required")
	}
	if opts.SystemSocket == "" {
		opts.SystemSocket = DefaultSystemSocket
	}
	if opts.Network.StateDir == "" {
		opts.Network.StateDir = filepath.Join(opts.DataDir, "network")
	}
	plan, err := Plan(name, opts.Ray, opts.HostRay)
	if err != nil {
		return nil, err
	}
	opts.HostRay = plan.HostRay
	c, err := selectRuntime(ctx, plan, opts)
	if err != nil {
		return nil, err
	}
	c.Ray, c.HostRay = plan.Ray, plan.HostRay
	switch {
	case c.Name == Containerd:
		c.Ray, c.HostRay = RayImage, nil
	case c.Name == Process && plan.Ray == RayImage:
		c.Ray = RaySim // auto found no containerd to run the images
	}
	return c, nil
}

// RayPlan is what Plan settles: the runtime to ask Select for and what runs Ray's images on it.
type RayPlan struct {
	// Runtime is the runtime name, auto only when the choice of Ray leaves it open.
	Runtime string
	// Why says why Runtime is the process runtime when --runtime=auto did not say so ("" otherwise).
	Why string
	// Ray is RayHost, RayImage or RaySim; with Runtime auto, RayImage stands for "containerd's images
	// if containerd runs, else raysim".
	Ray string
	// HostRay is the host's Ray when Ray is RayHost.
	HostRay *hostray.Ray
}

// Plan settles what --runtime=runtime and --ray=ray mean together, given the host's Ray found (nil:
// none). The host's Ray and raysim run Ray's images as host processes, so they need the process runtime;
// containerd runs the images themselves (it pulls rayproject/ray, which needs a registry). With
// --runtime=auto, the host's Ray found (or --ray=sim) takes the process runtime, so that KubeRay's
// samples run real Ray on a machine without a registry, unedited. A pair that contradicts itself is an
// error saying what to ask for instead.
func Plan(runtime, ray string, found *hostray.Ray) (RayPlan, error) {
	if runtime == "" {
		runtime = Auto
	}
	if ray == "" {
		ray = RayAuto
	}
	if runtime == PerPod {
		// Ray's images run on its process runtime, as with --runtime=process.
		p, err := Plan(Process, ray, found)
		p.Runtime, p.Why = PerPod, ""
		return p, err
	}
	p := RayPlan{Runtime: runtime}
	switch ray {
	case RayAuto:
		switch {
		case found == nil:
			p.Ray = RaySim
			if runtime != Process {
				p.Ray = RayImage
			}
		case runtime == Auto || runtime == Process:
			p.Runtime, p.Ray, p.HostRay = Process, RayHost, found
			if runtime == Auto {
				p.Why = "the host's Ray runs Ray's images; containerd would pull them (--ray=image)"
			}
		default:
			p.Ray = RayImage
		}
	case RayHost, RaySim:
		what := "raysim"
		if ray == RayHost {
			if found == nil {
				return p, errors.New("--ray=host: no Ray found on this host")
			}
			what, p.HostRay = "the host's Ray", found
		}
		if runtime == Containerd {
			return p, fmt.Errorf("--ray=%s runs Ray's images on %s, with the process runtime; --runtime=containerd runs the images themselves (--ray=image)", ray, what)
		}
		p.Ray = ray
		if runtime == Auto {
			p.Runtime, p.Why = Process, "--ray="+ray
		}
	case RayImage:
		if runtime == Process {
			return p, errors.New("--ray=image needs containerd, which pulls and runs Ray's images; the process runtime runs them on the host's Ray or raysim (--ray=host, --ray=sim)")
		}
		p.Ray = RayImage
		if runtime == Auto {
			p.Runtime, p.Why = Containerd, ""
		}
	default:
		return p, fmt.Errorf("--ray=%q: want %s, %s, %s or %s", ray, RayAuto, RayHost, RayImage, RaySim)
	}
	if runtime == Fake {
		p.Runtime, p.Why, p.HostRay = Fake, "", nil
	}
	return p, nil
}

// selectRuntime makes the runtime plan names.
func selectRuntime(ctx context.Context, plan RayPlan, opts Options) (*Choice, error) {
	switch name := plan.Runtime; name {
	case Fake:
		if opts.NewFake == nil {
			return nil, errors.New("runtime fake: no constructor given")
		}
		r, err := opts.NewFake()
		if err != nil {
			return nil, err
		}
		return &Choice{Runtime: r, Name: Fake, Reason: "fake (no processes; pods only report running)", Close: r.Close}, nil
	case Process:
		if plan.Why == "" {
			return selectProcess(ctx, opts, "asked for")
		}
		// auto: the process runtime for Ray's images, containerd beside it for the others where it runs.
		why := plan.Why
		notHere := containerdUnavailable(opts)
		if notHere == "" {
			c, err := selectPerPod(ctx, opts, why)
			if err == nil {
				return c, nil
			}
			notHere = "containerd failed: " + firstLine(err.Error())
		}
		// Pods of other images fail, saying what would run them.
		opts.notFoundHint = "other images run on containerd, not used here: " + notHere
		return selectProcess(ctx, opts, why+"; no other image runs: "+notHere)
	case PerPod:
		if notHere := containerdUnavailable(opts); notHere != "" {
			return nil, fmt.Errorf("runtime %s: %s", PerPod, notHere)
		}
		return selectPerPod(ctx, opts, "asked for")
	case Containerd:
		if err := containerdPlatform(goruntime.GOOS); err != nil {
			return nil, fmt.Errorf("runtime containerd: %w; --runtime=process runs pods as host processes", err)
		}
		if c, err := useSocket(ctx, opts, nil); err == nil {
			return c, nil
		}
		return startPrivate(ctx, opts, nil)
	case Auto, "":
		if err := containerdPlatform(goruntime.GOOS); err != nil {
			return selectProcess(ctx, opts, err.Error())
		}
		if c, err := useSocket(ctx, opts, nil); err == nil {
			return c, nil
		}
		switch why := unmapped(opts); {
		case !containerd.Available():
			return selectProcess(ctx, opts, "no containerd binary on PATH")
		case os.Geteuid() != 0 && !opts.Rootless:
			return selectProcess(ctx, opts, "containerd needs root, or rayctl's user namespace")
		case why != "":
			return selectProcess(ctx, opts, why)
		}
		c, err := startPrivate(ctx, opts, nil)
		if err != nil {
			return selectProcess(ctx, opts, "the private containerd failed: "+firstLine(err.Error()))
		}
		return c, nil
	default:
		return nil, fmt.Errorf("unknown runtime %q (want auto, containerd, process or fake)", name)
	}
}

// containerdUnavailable says why containerd cannot run pods beside the process runtime here ("": it
// can): not Linux, rayctl runs as an ordinary user, or no containerd answers and none is installed.
func containerdUnavailable(opts Options) string {
	if err := containerdPlatform(goruntime.GOOS); err != nil {
		return err.Error()
	}
	if _, err := os.Stat(opts.SystemSocket); err == nil && opts.SystemSocket != "-" && !opts.Rootless {
		return ""
	}
	if why := unmapped(opts); why != "" {
		return why
	}
	switch {
	case !containerd.Available():
		return "no containerd binary on PATH (apt-get install containerd runc)"
	case os.Geteuid() != 0 && !opts.Rootless:
		return "containerd needs root, or rayctl's user namespace"
	}
	return ""
}

// unmapped says why a rootless rayctl's containerd could not unpack most images ("" when it could, or
// as root): its user namespace maps no subordinate ids, and most images hold files of other users (Ray's
// /home/ray is uid 1000). --runtime=containerd still tries; auto does not choose it then.
func unmapped(opts Options) string {
	if ok, why := userns.SubordinateIDs(); opts.Rootless && !ok {
		return "rayctl's user namespace maps only your own uid and gid (" + why + "), so containerd could not unpack images whose files belong to other users"
	}
	return ""
}

// selectPerPod makes the process runtime and containerd (an existing socket, else a private one) on one
// pod network, and the runtime that routes each pod to one of them (package perpod).
func selectPerPod(ctx context.Context, opts Options, why string) (*Choice, error) {
	nm, err := network.New(opts.Network)
	if err != nil {
		return nil, err
	}
	cc, err := useSocket(ctx, opts, nm)
	if err != nil {
		if cc, err = startPrivate(ctx, opts, nm); err != nil {
			return nil, err
		}
	}
	pr, err := newProcess(ctx, opts, nm)
	if err != nil {
		_ = cc.Close()
		return nil, err
	}
	rayRuns := "Ray's images on raysim, and host programs"
	if opts.HostRay != nil {
		rayRuns = "Ray's images on the host's Ray, and host programs"
	}
	r, err := perpod.New(
		perpod.Sibling{Handler: Process, Runtime: pr, Runs: rayRuns},
		perpod.Sibling{Handler: Containerd, Runtime: cc.Runtime, Runs: "images, in containers"})
	if err != nil {
		_ = errors.Join(pr.Close(), cc.Close())
		return nil, err
	}
	return &Choice{Runtime: r, Name: PerPod, Network: nm, Address: cc.Address, Failed: cc.Failed,
		Close: func() error { return errors.Join(pr.Close(), cc.Close()) },
		Reason: fmt.Sprintf("per pod, on one pod network: process for Ray's images (%s), %s for every other image; a pod's runtimeClassName %q or %q chooses",
			why, cc.Reason, Process, Containerd)}, nil
}

// containerdPlatform says why containerd cannot run rayctl's pods on goos: its containers need Linux
// (namespaces, cgroups, the pod bridge); nil on Linux.
func containerdPlatform(goos string) error {
	if goos == "linux" {
		return nil
	}
	return fmt.Errorf("containerd runs pods on Linux only, not on %s", goos)
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// useSocket connects to an existing containerd if its socket answers. A rootless rayctl takes none: a
// system containerd would run its pods as the host's root, in namespaces rayctl's user owns.
func useSocket(ctx context.Context, opts Options, nm *network.Manager) (*Choice, error) {
	if opts.SystemSocket == "-" || opts.Rootless {
		return nil, errors.New("no system socket")
	}
	if _, err := os.Stat(opts.SystemSocket); err != nil {
		return nil, err
	}
	version, err := ping(ctx, opts.SystemSocket)
	if err != nil {
		return nil, err
	}
	if nm == nil {
		if nm, err = network.New(opts.Network); err != nil {
			return nil, err
		}
	}
	r, err := containerd.New(ctx, containerd.Options{Address: opts.SystemSocket, FIFODir: filepath.Join(opts.DataDir, "containerd-fifo"), Network: nm})
	if err != nil {
		return nil, err
	}
	return &Choice{Runtime: r, Name: Containerd, Network: nm, Close: r.Close, Address: opts.SystemSocket,
		Reason: fmt.Sprintf("containerd %s (existing socket %s, namespace %s)", version, opts.SystemSocket, containerd.Namespace)}, nil
}

func ping(ctx context.Context, address string) (string, error) {
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	c, err := ctrd.New(address, ctrd.WithTimeout(2*time.Second))
	if err != nil {
		return "", err
	}
	defer c.Close()
	v, err := c.Version(pctx)
	return v.Version, err
}

// EndRootlessContainers ends what a private containerd of dataDir left running inside a user namespace
// of rayctl's (rootless) that is gone: the daemon, its shims and their containers (containerd.EndPrivate).
// The launcher of a rootless rayctl calls it once that rayctl has ended, however it ended.
func EndRootlessContainers(dataDir string) int {
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		return 0
	}
	return containerd.EndPrivate(privateDir(abs))
}

// privateDir is where a private containerd of dataDir keeps its root, state and sockets.
func privateDir(dataDir string) string { return filepath.Join(dataDir, "containerd") }

// startPrivate starts containerd under <DataDir>/containerd.
func startPrivate(ctx context.Context, opts Options, nm *network.Manager) (*Choice, error) {
	start := time.Now()
	d, err := containerd.StartPrivate(ctx, privateDir(opts.DataDir))
	if err != nil {
		return nil, err
	}
	took := time.Since(start)
	if nm == nil {
		if nm, err = network.New(opts.Network); err != nil {
			_ = d.Stop()
			return nil, err
		}
	}
	r, err := containerd.New(ctx, containerd.Options{Address: d.Address, FIFODir: d.FIFODir, Network: nm, StateDir: d.StateDir})
	if err != nil {
		_ = d.Stop()
		return nil, err
	}
	version, _ := r.Version(ctx)
	failed := supervise(d, r, opts)
	how := "private"
	if opts.Rootless {
		how = "private, rootless: inside rayctl's user namespace"
		if ok, why := userns.SubordinateIDs(); !ok {
			how += "; only your own ids are mapped there (" + why + "), so images with files of other users cannot be unpacked"
		}
	}
	return &Choice{Runtime: r, Name: Containerd, Network: nm, Address: d.Address, Failed: failed.err,
		Reason: fmt.Sprintf("containerd %s (%s, started in %d ms)", strings.TrimPrefix(version, "containerd://"), how, took.Milliseconds()),
		Close: func() error {
			failed.stop()
			return errors.Join(r.Close(), d.Stop())
		}}, nil
}

// supervision is a running Daemon.Supervise.
type supervision struct {
	err  chan error
	stop func()
}

// supervise restarts the private containerd d whenever it dies, reconnects r to the new one (which
// re-adopts the running containers), and says so through opts.Logf.
func supervise(d *containerd.Daemon, r *containerd.Runtime, opts Options) supervision {
	logf := opts.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	o := opts.Supervise
	o.OnExit = func(err error) {
		logf("the private containerd exited (%v); restarting it (its log: %s)", err, d.LogPath)
	}
	o.OnRestartFailed = func(err error) {
		logf("restarting the private containerd failed: %s", firstLine(err.Error()))
	}
	o.OnRestart = func(down time.Duration) {
		start := time.Now()
		if err := r.Reconnect(ctx); err != nil {
			logf("the private containerd is back (pid %d, after %d ms) but reconnecting to it failed: %v", d.Pid(), down.Milliseconds(), err)
			return
		}
		logf("the private containerd is back (pid %d) after %d ms; reconnected and re-adopted its containers in %d ms",
			d.Pid(), down.Milliseconds(), time.Since(start).Milliseconds())
	}
	failed := d.Supervise(ctx, o)
	out := make(chan error, 1)
	go func() {
		if err, ok := <-failed; ok {
			logf("%v", err)
			out <- err
		}
	}()
	return supervision{err: out, stop: cancel}
}

func selectProcess(ctx context.Context, opts Options, why string) (*Choice, error) {
	netCfg := opts.Network
	netCfg.HostOnly = netCfg.HostOnly || goruntime.GOOS != "linux" || os.Geteuid() != 0
	nm, err := network.New(netCfg)
	if err != nil {
		return nil, err
	}
	r, err := newProcess(ctx, opts, nm)
	if err != nil {
		return nil, err
	}
	mode := "pods share the host network"
	if !nm.Config().HostOnly {
		mode = "a network namespace per pod"
	}
	return &Choice{Runtime: r, Name: Process, Network: nm, Close: r.Close,
		Reason: fmt.Sprintf("process (%s; %s)", why, mode)}, nil
}

// newProcess makes the process runtime on the pod network nm, its containers confined as rayctl's
// mode allows.
func newProcess(ctx context.Context, opts Options, nm *network.Manager) (*process.Runtime, error) {
	popts := process.Options{StateDir: filepath.Join(opts.DataDir, "process"), Network: nm, RayBinary: opts.RayBinary, HostRay: opts.HostRay,
		NotFoundHint: opts.notFoundHint}
	switch {
	case opts.Rootless:
		// Root in rayctl's user namespace is the user who started it; the next rayctl makes a new
		// namespace and cannot enter this one's, so containers end with it.
		popts.ReadOnlyHost, popts.ContainersEndWithRuntime = true, true
		popts.HiddenDirs = []string{opts.DataDir}
	case os.Geteuid() == 0 && goruntime.GOOS == "linux":
		// Real root: no container process is; each runs as the instance's unprivileged pod user (on
		// the host's network too, with --pod-network=host).
		user := process.PodUser(opts.DataDir)
		popts.RunAs, popts.ReadOnlyHost, popts.HiddenDirs = &user, true, []string{opts.DataDir}
	}
	return process.New(ctx, popts)
}
