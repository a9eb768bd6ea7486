package containerd

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	ctrd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/errdefs"

	"github.com/rayctl/rayctl/pkg/runtime"
)

// createdTask creates a container in sb and its task, which it does not start: a shim with `runc init`
// waiting on its exec FIFO, as a rayctl killed between NewTask and Start leaves it.
func (e *env) createdTask(t *testing.T, r *Runtime, sb *runtime.Sandbox, name string) (string, int) {
	t.Helper()
	ctx := testCtx(t)
	id, err := r.CreateContainer(ctx, sb, runtime.ContainerConfig{Name: name, Image: e.ref, Command: []string{"sleep", "1000"},
		LogPath: filepath.Join(sb.Config.Dir, name+".log")})
	if err != nil {
		t.Fatal(err)
	}
	c, err := r.client.LoadContainer(r.ctx(ctx), id)
	if err != nil {
		t.Fatal(err)
	}
	task, err := c.NewTask(r.ctx(ctx), cio.NewCreator(cio.WithFIFODir(e.daemon.FIFODir)))
	if err != nil {
		t.Fatal(err)
	}
	if st, err := task.Status(r.ctx(ctx)); err != nil || st.Status != ctrd.Created {
		t.Fatalf("the task of %s: %+v, %v; want Created", id, st, err)
	}
	if pids := pidsWith("-id\x00" + id + "\x00"); len(pids) != 1 {
		t.Fatalf("shims of %s: %v, want one", id, pids)
	}
	return id, int(task.Pid())
}

// wantGone fails t if anything of task id is left on the host: a shim, its init process, runc's state
// or a cgroup.
func (e *env) wantGone(t *testing.T, r *Runtime, id string, initPid int) {
	t.Helper()
	if pids := pidsWith("-id\x00" + id + "\x00"); len(pids) > 0 {
		t.Errorf("the shim of %s still runs (pids %v)", id, pids)
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	if initPid > 0 && alive(initPid) {
		t.Errorf("the init process of %s (pid %d, %s) still runs", id, initPid, cmdline(initPid))
		_ = syscall.Kill(initPid, syscall.SIGKILL)
	}
	if out, err := exec.Command("runc", "--root", r.runcRoot(), "state", id).CombinedOutput(); err == nil {
		t.Errorf("runc still has container %s: %s", id, out)
	}
	for _, root := range cgroupRoots() {
		if _, err := os.Stat(filepath.Join(root, r.cgroupParent, id)); err == nil {
			t.Errorf("the cgroup %s of %s is left", filepath.Join(root, r.cgroupParent, id), id)
		}
	}
}

func cmdline(pid int) string {
	b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	return strings.ReplaceAll(strings.TrimRight(string(b), "\x00"), "\x00", " ")
}

// TestSweepRemovesAnUnstartedTask: a task made but never started (rayctl killed between NewTask and
// Start) is killed and deleted by the next sweep, `runc init` and cgroups included; its container stays,
// Created and without a task, for the kubelet to replace; a started container is left alone.
func TestSweepRemovesAnUnstartedTask(t *testing.T) {
	e := setup(t)
	r := e.runtime(t)
	sb := e.pod(t, r, "unstarted")
	running, _ := e.run(t, r, sb, "running", "exec sleep 1000")
	id, initPid := e.createdTask(t, r, sb, "created")

	// The next rayctl.
	r2 := e.runtime(t)
	ctx := testCtx(t)
	removed, err := r2.Sweep(ctx, map[string]bool{sb.PodUID: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("swept: %v", removed)
	if !containsPrefix(removed, "1 unstarted tasks") {
		t.Errorf("the sweep reports %v, want 1 unstarted task among them", removed)
	}
	e.wantGone(t, r2, id, initPid)
	st, err := r2.ContainerStatus(ctx, id)
	if err != nil || st.State != runtime.StateCreated {
		t.Errorf("the unstarted container after the sweep: %+v, %v; want Created", st, err)
	}
	if st, err := r2.ContainerStatus(ctx, running); err != nil || st.State != runtime.StateRunning {
		t.Errorf("the running container after the sweep: %+v, %v; want Running", st, err)
	}
	if _, err := os.Stat(e.net.NetNSPath(sb.PodUID)); err != nil {
		t.Errorf("the live pod's netns after the sweep: %v", err)
	}
}

// TestSweepRemovesATaskContainerdLost stages what a NewTask cut short can leave: a shim and its `runc
// init` that containerd has no task for (containerd was killed, and its bundle is not where the new
// one looks), with the rootfs still mounted. The sweep kills both, deletes runc's container and the
// cgroups, and unmounts the rootfs, so the container and its snapshot can then be removed.
func TestSweepRemovesATaskContainerdLost(t *testing.T) {
	e := setup(t)
	r := e.runtime(t)
	sb := e.pod(t, r, "lost")
	id, initPid := e.createdTask(t, r, sb, "lost")

	// containerd dies; the bundle moves out of its sight; a new containerd starts without the task.
	if err := syscall.Kill(e.daemon.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-e.daemon.Done()
	bundle := filepath.Join(r.taskDir(), id)
	stash := filepath.Join(e.daemon.StateDir, "stash-"+id)
	if err := os.Rename(bundle, stash); err != nil {
		t.Fatal(err)
	}
	if err := e.daemon.start(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	r2 := e.runtime(t)
	ctx := testCtx(t)
	c, err := r2.client.LoadContainer(r2.ctx(ctx), id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Task(r2.ctx(ctx), nil); !errdefs.IsNotFound(err) {
		t.Fatalf("containerd still knows the task of %s: %v", id, err)
	}
	if pids := pidsWith("-id\x00" + id + "\x00"); len(pids) != 1 || !alive(initPid) {
		t.Fatalf("before the sweep: shims %v, init %d alive %v; want the shim and init still running", pids, initPid, alive(initPid))
	}

	removed, err := r2.Sweep(ctx, map[string]bool{sb.PodUID: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("swept: %v", removed)
	for _, want := range []string{"1 shims", "1 runc containers", "1 mounts"} {
		if !containsPrefix(removed, want) {
			t.Errorf("the sweep reports %v, want %q among them", removed, want)
		}
	}
	e.wantGone(t, r2, id, initPid)
	for _, m := range mountPoints() {
		if within(m, stash) {
			t.Errorf("%s is still mounted", m)
		}
	}
	_ = os.RemoveAll(stash)
	if err := r2.RemoveContainer(ctx, id); err != nil {
		t.Errorf("removing the container after the sweep: %v", err)
	}
	if _, err := r2.client.SnapshotService(r2.snap).Stat(r2.ctx(ctx), id); !errdefs.IsNotFound(err) {
		t.Errorf("the container's snapshot after its removal: %v", err)
	}
}

// TestSweepRemovesOrphanedSnapshotsAndLeases: an earlier process's lease holding an active snapshot
// that no container uses (NewContainer cut short) and an unpack's `extract-…` snapshot goes, with
// them; a lease of this process and the snapshot it holds stay, and so does the image: a container runs
// from it afterwards. A network namespace with no sandbox record and an empty cgroup of the data dir
// go too.
func TestSweepRemovesOrphanedSnapshotsAndLeases(t *testing.T) {
	e := setup(t)
	old := e.runtime(t)
	ctx := testCtx(t)
	octx, _, err := old.client.WithLease(old.ctx(ctx)) // never ended: the process was killed
	if err != nil {
		t.Fatal(err)
	}
	sn := old.client.SnapshotService(old.snap)
	orphan, extract := "orphan-"+randHex(4), "extract-"+randHex(6)+" sha256:"+randHex(32)
	for _, key := range []string{orphan, extract} {
		if _, err := sn.Prepare(octx, key, ""); err != nil {
			t.Fatal(err)
		}
	}
	uid := "uid-" + randHex(6)
	if _, err := e.net.Setup(uid); err != nil {
		t.Fatal(err)
	}
	leak := filepath.Join("/sys/fs/cgroup/memory", old.cgroupParent, "leak-"+randHex(4))
	if err := os.MkdirAll(leak, 0o755); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond) // leases' times have containerd's clock

	r := e.runtime(t)
	nctx, done, err := r.client.WithLease(r.ctx(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer done(r.ctx(context.Background()))
	kept := "kept-" + randHex(4)
	if _, err := r.client.SnapshotService(r.snap).Prepare(nctx, kept, ""); err != nil {
		t.Fatal(err)
	}
	removed, err := r.Sweep(ctx, map[string]bool{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("swept: %v", removed)
	snaps := r.client.SnapshotService(r.snap)
	for _, key := range []string{orphan, extract} {
		if _, err := snaps.Stat(r.ctx(ctx), key); !errdefs.IsNotFound(err) {
			t.Errorf("snapshot %q after the sweep: %v, want it gone", key, err)
		}
	}
	if _, err := snaps.Stat(r.ctx(ctx), kept); err != nil {
		t.Errorf("the snapshot this process's lease holds: %v", err)
	}
	ls, err := r.client.LeasesService().List(r.ctx(ctx))
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 1 {
		t.Errorf("leases after the sweep: %+v, want this process's one", ls)
	}
	if _, err := os.Stat(e.net.NetNSPath(uid)); !os.IsNotExist(err) {
		t.Errorf("the netns without a sandbox record after the sweep: %v", err)
	}
	if _, err := os.Stat(leak); !os.IsNotExist(err) {
		t.Errorf("the empty cgroup %s after the sweep: %v", leak, err)
		_ = os.Remove(leak)
	}
	_ = snaps.Remove(r.ctx(ctx), kept)

	sb := e.pod(t, r, "after")
	id, logPath := e.run(t, r, sb, "after", "echo still here")
	waitExited(t, r, id)
	waitLog(t, logPath, "still here")
}

func containsPrefix(list []string, prefix string) bool {
	for _, s := range list {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}
