package process

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rayctl/rayctl/pkg/runtime"
)

// isolatedFixture is a fixture whose containers get their own namespaces.
func isolatedFixture(t *testing.T) *fixture {
	t.Helper()
	return isolatedFixtureWith(t, nil)
}

// isolatedFixtureWith is isolatedFixture with options set by set.
func isolatedFixtureWith(t *testing.T, set func(*Options)) *fixture {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("namespaces need root")
	}
	f := newFixtureWith(t, set)
	if !f.r.Isolated() {
		t.Fatal("root on Linux should isolate")
	}
	return f
}

// execOut runs a shell script in container id and returns its output and exit code.
func execOut(t *testing.T, r *Runtime, id, script string) (string, int) {
	t.Helper()
	var out bytes.Buffer
	code, err := r.Exec(testCtx(t), id, []string{"/bin/sh", "-c", script}, runtime.ExecIO{Stdout: &out, Stderr: &out})
	if err != nil {
		t.Fatalf("exec %q: %v", script, err)
	}
	return out.String(), code
}

// hostHas reports whether a process on the host has marker in its command line.
func hostHas(marker string) bool {
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err == nil && strings.Contains(string(bytes.ReplaceAll(b, []byte{0}, []byte{' '})), marker) {
			return true
		}
	}
	return false
}

func TestAPodSeesAndSignalsOnlyItsOwnProcesses(t *testing.T) {
	f := isolatedFixture(t)
	a, b := f.pod(t, "alpha"), f.pod(t, "beta")
	digits := fmtDigits()
	marker, pattern := "sleep 4242."+digits, "sleep 4242[.]"+digits // the pattern does not match the shell running pkill
	ida, la := f.run(t, f.r, a, sh("victim", "echo ready; exec "+marker))
	idb, lb := f.run(t, f.r, b, sh("killer", "echo ready; exec sleep 1000"))
	waitLog(t, la, "ready")
	waitLog(t, lb, "ready")
	ra, _ := f.r.load(ida)

	// /proc in beta shows beta's processes only: its init, its sleep, this shell.
	out, _ := execOut(t, f.r, idb, `cat /proc/1/cmdline | tr '\0' ' '; echo; for p in /proc/[0-9]*; do tr '\0' ' ' < $p/cmdline; echo; done`)
	if strings.Contains(out, marker) || !strings.HasPrefix(out, initArg0+" ") || !strings.Contains(out, "sleep 1000") {
		t.Errorf("beta's processes:\n%s", out)
	}
	// What `ray stop` does, from beta: kill by name; and by alpha's host pid.
	if out, code := execOut(t, f.r, idb, "pkill -f '"+pattern+"'"); code != 1 {
		t.Errorf("pkill in beta found alpha's process: %d %s", code, out)
	}
	if out, code := execOut(t, f.r, idb, "kill -9 "+itoa(ra.Pid)+" "+itoa(ra.Pid+1)); code == 0 {
		t.Errorf("beta killed alpha's host pids: %s", out)
	}
	if s, _ := f.r.ContainerStatus(testCtx(t), ida); s.State != runtime.StateRunning {
		t.Fatalf("alpha's container: %+v", s)
	}
	// Within alpha, exec sees and signals alpha's processes: the victim ends by SIGTERM. (The exec's own
	// shell may end by SIGKILL, 137: the victim's end ends alpha's PID namespace, and the kernel kills
	// what is left in it, the exec included, if it has not exited first.)
	if out, code := execOut(t, f.r, ida, "pkill -f '"+pattern+"'"); code != 0 && code != 137 {
		t.Errorf("pkill in alpha: %d %s", code, out)
	}
	if s := waitExited(t, f.r, ida); s.ExitCode != 143 {
		t.Errorf("alpha after pkill: %+v (want 143: pkill found the victim and sent SIGTERM)", s)
	}
}

func TestStoppingAContainerKillsItsWholePIDNamespace(t *testing.T) {
	f := isolatedFixture(t)
	sb := f.pod(t, "daemons")
	marker := "sleep 4545." + fmtDigits()
	// A daemon in a session of its own, deaf to SIGTERM: the group kill misses it.
	id, logPath := f.run(t, f.r, sb, sh("main", `setsid sh -c "trap '' TERM; exec `+marker+`" & echo ready; exec sleep 1000`))
	waitLog(t, logPath, "ready")
	for deadline := time.Now().Add(30 * time.Second); !hostHas(marker); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the daemon never started")
		}
	}
	if err := f.r.StopContainer(testCtx(t), id, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if s, _ := f.r.ContainerStatus(testCtx(t), id); s.ExitCode != 143 {
		t.Errorf("status: %+v", s)
	}
	for deadline := time.Now().Add(30 * time.Second); hostHas(marker); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the daemon outlived its container")
		}
	}
}

func TestEachContainerHasAPrivateTmp(t *testing.T) {
	f := isolatedFixture(t)
	a, b := f.pod(t, "alpha"), f.pod(t, "beta")
	name := "/tmp/private-" + fmtDigits()
	ida, la := f.run(t, f.r, a, sh("writer", "mkdir -p /tmp/ray && echo alpha > /tmp/ray/session_latest && echo mine > "+name+" && echo ready; exec sleep 1000"))
	waitLog(t, la, "ready")
	if out, _ := execOut(t, f.r, ida, "cat "+name+" /tmp/ray/session_latest"); out != "mine\nalpha\n" {
		t.Errorf("alpha reads back %q", out)
	}
	id, lb := f.run(t, f.r, b, sh("reader", "cat "+name+" /tmp/ray/session_latest 2>/dev/null || echo absent"))
	waitExited(t, f.r, id)
	waitLog(t, lb, "stdout F absent")
	if _, err := os.Stat(name); !os.IsNotExist(err) {
		t.Errorf("alpha's /tmp file is on the host's /tmp: %v", err)
	}
	if got, err := os.ReadFile(filepath.Join(a.Config.Dir, "rt", "writer", name)); err != nil || string(got) != "mine\n" {
		t.Errorf("alpha's /tmp is not under its pod dir: %q %v", got, err)
	}
}

func TestRayImagesGetAHomeOfTheirOwn(t *testing.T) {
	f := isolatedFixture(t)
	sb := f.pod(t, "head")
	cfg := runtime.ContainerConfig{Name: "ray-head", Image: "rayproject/ray:2.60.0",
		Command: []string{"/bin/sh", "-c", "echo home=$HOME; pwd; touch $HOME/.written && echo wrote"}}
	id, logPath := f.run(t, f.r, sb, cfg)
	if s := waitExited(t, f.r, id); s.ExitCode != 0 {
		t.Errorf("status %+v", s)
	}
	waitLog(t, logPath, "wrote")
	got := strings.Join(logLines(t, logPath), "|")
	if !strings.Contains(got, "stdout home=/home/ray|stdout /home/ray|") {
		t.Errorf("log %q", got)
	}
	if _, err := os.Stat(filepath.Join(sb.Config.Dir, "rt", "ray-head", "home", ".written")); err != nil {
		t.Errorf("the home is not the pod's: %v", err)
	}
}

func TestLimitsShowInTheContainersCgroup(t *testing.T) {
	f := isolatedFixture(t)
	if _, err := ownCgroup("memory"); err != nil {
		t.Skip(err)
	}
	sb := f.pod(t, "limited")
	cfg := sh("limited", "cat /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/cpu/cpu.cfs_quota_us; grep -E ':(memory|cpu)[:,]' /proc/self/cgroup | grep -c rayctl.process; echo ready; exec sleep 1000")
	cfg.Resources = runtime.Resources{MemoryBytes: 256 << 20, CPUMillis: 500}
	id, logPath := f.run(t, f.r, sb, cfg)
	waitLog(t, logPath, "ready")
	got := strings.Join(logLines(t, logPath), "|")
	if !strings.HasPrefix(got, "stdout 268435456|stdout 50000|stdout 2|") {
		t.Errorf("the container's cgroup: %q", got)
	}
	rec, _ := f.r.load(id)
	if len(rec.Cgroups) != 2 {
		t.Fatalf("cgroups %+v", rec.Cgroups)
	}
	b, err := os.ReadFile(filepath.Join(rec.Cgroups[0].HostPath, "memory.limit_in_bytes"))
	if err != nil || strings.TrimSpace(string(b)) != "268435456" {
		t.Errorf("host side: %q %v", b, err)
	}
	if err := f.r.RemoveContainer(testCtx(t), id); err != nil {
		t.Fatal(err)
	}
	for _, cg := range rec.Cgroups {
		if _, err := os.Stat(cg.HostPath); !os.IsNotExist(err) {
			t.Errorf("cgroup %s outlived its container: %v", cg.HostPath, err)
		}
	}
}

func TestAPodThatSharesItsProcessNamespaceSharesItAmongItsContainersOnly(t *testing.T) {
	f := isolatedFixture(t)
	sb, err := f.r.RunSandbox(testCtx(t), runtime.SandboxConfig{PodUID: "uid-" + randHex(6), Namespace: "default", Name: "shared",
		Dir: t.TempDir(), ShareProcessNamespace: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.r.RemoveSandbox(testCtx(t), sb.PodUID) })
	other := f.pod(t, "other")
	digits := fmtDigits()
	marker, pattern := "sleep 4646."+digits, "sleep 4646[.]"+digits
	ida, la := f.run(t, f.r, sb, sh("app", "echo ready; exec "+marker))
	idb, lb := f.run(t, f.r, sb, sh("sidecar", "echo ready; exec sleep 1000"))
	ido, lo := f.run(t, f.r, other, sh("other", "echo ready; exec sleep 1000"))
	for _, l := range []string{la, lb, lo} {
		waitLog(t, l, "ready")
	}
	if out, code := execOut(t, f.r, ido, "pgrep -f '"+pattern+"'"); code != 1 {
		t.Errorf("another pod sees the shared pod's process: %d %s", code, out)
	}
	if out, _ := execOut(t, f.r, idb, "tr '\\0' ' ' < /proc/1/cmdline"); !strings.HasPrefix(out, pauseArg0) {
		t.Errorf("the shared namespace's PID 1 is %q", out)
	}
	if out, code := execOut(t, f.r, idb, "pkill -f '"+pattern+"'"); code != 0 {
		t.Errorf("the sidecar cannot signal the app: %d %s", code, out)
	}
	if s := waitExited(t, f.r, ida); s.ExitCode != 143 {
		t.Errorf("the app: %+v", s)
	}
	if s, _ := f.r.ContainerStatus(testCtx(t), idb); s.State != runtime.StateRunning {
		t.Errorf("the sidecar died with the app: %+v", s)
	}
	// Removing the sandbox ends its namespace, and the sidecar with it.
	if err := f.r.RemoveSandbox(testCtx(t), sb.PodUID); err != nil {
		t.Fatal(err)
	}
	if s := waitExited(t, f.r, idb); s.ExitCode != 137 {
		t.Errorf("the sidecar after the sandbox's removal: %+v", s)
	}
}

func TestContainersEndWithRuntimeGivesASharedPodANewPIDNamespace(t *testing.T) {
	f := isolatedFixture(t)
	sb, err := f.r.RunSandbox(testCtx(t), runtime.SandboxConfig{PodUID: "uid-" + randHex(6), Namespace: "default", Name: "shared",
		Dir: t.TempDir(), ShareProcessNamespace: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.r.RemoveSandbox(testCtx(t), sb.PodUID) })
	id, logPath := f.run(t, f.r, sb, sh("app", "echo ready; exec sleep 1000"))
	waitLog(t, logPath, "ready")
	old, err := f.r.loadHolder(sb.PodUID)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.r.Close(); err != nil {
		t.Fatal(err)
	}
	f.opts.ContainersEndWithRuntime = true
	second := f.open(t)
	if s, _ := second.ContainerStatus(testCtx(t), id); s.State != runtime.StateExited {
		t.Errorf("the leftover: %+v", s)
	}
	if sameProcess(old.Pid, old.StartTicks) {
		t.Error("the pod's old PID namespace holder still runs")
	}
	// The pod's next container gets a new shared namespace, which its exec sees.
	next, nextLog := f.run(t, second, sb, sh("again", "echo ready; exec sleep 1000"))
	waitLog(t, nextLog, "ready")
	if out, _ := execOut(t, second, next, "tr '\\0' ' ' < /proc/1/cmdline"); !strings.HasPrefix(out, pauseArg0) {
		t.Errorf("the new namespace's PID 1 is %q", out)
	}
	if err := second.RemoveSandbox(testCtx(t), sb.PodUID); err != nil {
		t.Fatal(err)
	}
}

// TestAContainerInitHoldsLittleMemory: the container init (this binary re-executed as PID 1 of the
// container) gives back the binary's pages it touched starting up, so each container costs a few MiB
// of resident memory for its init rather than the tens of MiB of a whole rayctl.
func TestAContainerInitHoldsLittleMemory(t *testing.T) {
	f := isolatedFixture(t)
	id, log := f.run(t, f.r, f.pod(t, "lean"), sh("app", "echo ready; exec sleep 1000"))
	waitLog(t, log, "ready")
	rec, err := f.r.load(id)
	if err != nil {
		t.Fatal(err)
	}
	if cmdline, _ := os.ReadFile("/proc/" + itoa(rec.Pid) + "/cmdline"); !bytes.HasPrefix(cmdline, []byte(initArg0+"\x00")) {
		t.Fatalf("pid %d is not the container init: %q", rec.Pid, cmdline)
	}
	// The init gives its pages back once the container's program has started, which may be just after
	// the program printed "ready": wait for it (until the test's context ends), then hold it to the bound.
	// Starting up touches the binary's code and tables (~30 MiB of rayctl); a few MiB stay in use.
	const most = 8 << 10 // KiB
	ctx := testCtx(t)
	var kb int
	var status []byte
	for {
		var err error
		if status, err = os.ReadFile("/proc/" + itoa(rec.Pid) + "/status"); err != nil {
			t.Fatal(err)
		}
		if kb = rssFileKiB(status); kb < 0 {
			t.Fatalf("no RssFile in:\n%s", status)
		}
		if kb <= most {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the container init still maps %d KiB of its binary (want at most %d):\n%s", kb, most, status)
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Logf("RssFile %d kB", kb)
}

// rssFileKiB is the RssFile line of a /proc/PID/status, in KiB (-1: none).
func rssFileKiB(status []byte) int {
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "RssFile:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return kb
		}
	}
	return -1
}

// A mount target or working dir the host lacks is made in the container's own
// mount namespace only, on a read-only host as rayctl runs it: the container
// finds its volumes there (writable ones writable) and the ancestors' other
// entries as they were, and the host gets none of the paths, whether their
// nearest existing ancestor is a dir (/run, through /var/run) or /, nor what a
// symbolic link to nothing at a target names.
func TestMissingMountTargetsAreNotMadeOnTheHost(t *testing.T) {
	f := isolatedFixtureWith(t, func(o *Options) { o.ReadOnlyHost = true })
	sb := f.pod(t, "targets")
	digits := fmtDigits()
	vol := t.TempDir()
	if err := os.WriteFile(filepath.Join(vol, "token"), []byte("secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	runDir, err := filepath.EvalSymlinks("/var/run")
	if err != nil {
		t.Fatal(err)
	}
	linkDir := "/var/tmp/rayctl-test-" + digits // not the container's private /tmp
	if err := os.MkdirAll(linkDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{"link", "link2"} { // the first covers linkDir, the second is on that cover
		if err := os.Symlink(linkDir+"/nothing-"+l, linkDir+"/"+l); err != nil {
			t.Fatal(err)
		}
	}
	made := []string{runDir + "/rayctl-test-" + digits, "/rayctl-test-" + digits, "/opt/rayctl-test-" + digits, linkDir + "/nothing-link", linkDir + "/nothing-link2"}
	t.Cleanup(func() {
		for _, p := range append(made, linkDir) {
			os.RemoveAll(p)
		}
	})
	secrets, top, work := "/var/run/rayctl-test-"+digits+"/serviceaccount", "/rayctl-test-"+digits+"/data", "/opt/rayctl-test-"+digits+"/work"
	script := "cat " + secrets + "/token " + top + "/token " + linkDir + "/link/token " + linkDir + "/link2/token; pwd; echo w > " + top + "/written; "
	var runEntry string
	if entries, err := os.ReadDir(runDir); err == nil && len(entries) > 0 {
		runEntry = runDir + "/" + entries[0].Name()
		script += "test -e " + runEntry + " && echo run-entry; "
	}
	cfg := sh("reader", script+"test -r /etc/os-release && echo etc; test -d /proc/self && echo proc; echo done")
	cfg.WorkingDir = work
	cfg.Mounts = []runtime.Mount{{HostPath: vol, ContainerPath: secrets, ReadOnly: true}, {HostPath: vol, ContainerPath: top},
		{HostPath: vol, ContainerPath: linkDir + "/link", ReadOnly: true}, {HostPath: vol, ContainerPath: linkDir + "/link2", ReadOnly: true}}
	id, logPath := f.run(t, f.r, sb, cfg)
	if s := waitExited(t, f.r, id); s.ExitCode != 0 {
		t.Errorf("status %+v", s)
	}
	waitLog(t, logPath, "done")
	got := strings.Join(logLines(t, logPath), "|")
	want := "stdout secret|stdout secret|stdout secret|stdout secret|stdout " + work + "|"
	if runEntry != "" {
		want += "stdout run-entry|"
	}
	if !strings.HasPrefix(got, want+"stdout etc|stdout proc|stdout done") {
		t.Errorf("log %q, want it to start %q and see /etc and /proc", got, want)
	}
	if b, err := os.ReadFile(filepath.Join(vol, "written")); err != nil || string(b) != "w\n" {
		t.Errorf("the writable volume at %s: %q %v", top, b, err)
	}
	for _, p := range made {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s was made on the host: %v", p, err)
		}
	}
}

// Targets the runtime may not make are refused: a relative one (it would be
// made in rayctl's own working dir) and a symbolic link to nothing inside a
// volume (following it would make its target on the host).
func TestTargetsThatCannotBeMadeAreRefused(t *testing.T) {
	f := isolatedFixture(t)
	vol, other, volTarget := t.TempDir(), t.TempDir(), "/var/tmp/rayctl-vol-"+fmtDigits()
	if err := os.Symlink(other+"/nothing", vol+"/link"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		mounts []runtime.Mount
		want   string
	}{
		{[]runtime.Mount{{HostPath: t.TempDir(), ContainerPath: "rayctl-relative-" + fmtDigits()}}, "not an absolute path"},
		{[]runtime.Mount{{HostPath: vol, ContainerPath: volTarget}, {HostPath: t.TempDir(), ContainerPath: volTarget + "/link"}},
			"symbolic link to nothing"},
	} {
		sb := f.pod(t, "refused")
		cfg := sh("c", "true")
		cfg.Image, cfg.LogPath = "docker.io/library/busybox:latest", filepath.Join(sb.Config.Dir, "c", "0.log")
		cfg.Mounts = c.mounts
		id, err := f.r.CreateContainer(testCtx(t), sb, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.r.StartContainer(testCtx(t), id); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("start with %v: %v, want %q", c.mounts, err, c.want)
		}
	}
	if _, err := os.Lstat(other + "/nothing"); !os.IsNotExist(err) {
		t.Errorf("the link's target was made on the host: %v", err)
	}
}
