package containerd

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	ctrd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/leases"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/errdefs"

	"github.com/rayctl/rayctl/pkg/runtime"
)

var _ runtime.Sweeper = (*Runtime)(nil)

// Sweep removes what a rayctl killed part-way through a pod's creation (or a containerd that lost
// track of a task it was making) leaves behind, so that neither a restart nor `rayctl down --purge`
// keeps it alive:
//
//   - tasks made but never started (a shim with `runc init` blocked on its exec FIFO): killed and
//     deleted; their container stays, Created, for the kubelet to start anew or remove;
//   - on a containerd this data dir has alone (Options.StateDir): shims, runc containers, bundles and
//     mounts of tasks containerd no longer knows, and leases left by earlier processes (deleting them
//     lets containerd's GC take what they held: half-written content, interrupted `extract-…` unpacks);
//   - active snapshots no container references and no lease holds;
//   - cgroups under this data dir's parent that no task holds;
//   - network namespaces, IPs and sandbox records of pods not in live (nil: of every pod).
//
// Nothing else may create containers or tasks through this containerd while Sweep runs: the kubelet
// calls it before it starts its pod workers, the purge after rayctl stopped. It returns what it removed,
// one phrase per kind.
func (r *Runtime) Sweep(ctx context.Context, live map[string]bool) ([]string, error) {
	ctx = r.ctx(ctx)
	var s sweepLog
	s.add("unstarted tasks", r.sweepUnstarted(ctx, &s))
	tasks, err := r.taskIDs(ctx)
	if err != nil {
		return nil, err
	}
	var gone map[string]bool // ids of tasks containerd does not know that were found and taken apart
	if r.stateDir != "" {
		gone = r.sweepUnknownTasks(tasks, &s)
		s.add("old leases", r.sweepLeases(ctx, &s))
	}
	s.add("snapshots", r.sweepSnapshots(ctx, &s))
	s.add("cgroups", r.sweepCgroups(tasks, gone))
	pods, err := r.net.Cleanup(live)
	s.err(err)
	s.add("pod networks", len(pods))
	return s.summary(), errors.Join(s.errs...)
}

// sweepLog counts what a sweep removed and keeps its errors.
type sweepLog struct {
	done []string
	errs []error
}

func (s *sweepLog) add(what string, n int) {
	if n > 0 {
		s.done = append(s.done, fmt.Sprintf("%d %s", n, what))
	}
}

func (s *sweepLog) err(err error) {
	if err != nil {
		s.errs = append(s.errs, err)
	}
}

func (s *sweepLog) summary() []string { return s.done }

// taskIDs lists the tasks containerd knows in the namespace.
func (r *Runtime) taskIDs(ctx context.Context) (map[string]bool, error) {
	resp, err := r.client.TaskService().List(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("listing tasks: %w", err)
	}
	ids := map[string]bool{}
	for _, t := range resp.Tasks {
		ids[t.ID] = true
	}
	return ids, nil
}

// sweepUnstarted kills and deletes the tasks of containers that were never started: a start cut short
// between NewTask and Start. The container itself stays (the kubelet sees it Created, without a task).
func (r *Runtime) sweepUnstarted(ctx context.Context, s *sweepLog) int {
	cs, err := r.client.Containers(ctx)
	if err != nil {
		s.err(fmt.Errorf("listing containers: %w", err))
		return 0
	}
	n := 0
	for _, c := range cs {
		labels, err := c.Labels(ctx)
		if err != nil || labels[labelStartedAt] != "" || labels[labelExitCode] != "" {
			continue
		}
		r.mu.Lock()
		starting, a := r.starting[c.ID()], r.attached[c.ID()]
		r.mu.Unlock()
		if starting || !r.taskCreated(ctx, c) {
			continue
		}
		if a != nil {
			// Nothing ran to follow; the deletion must not read as an exit.
			r.mu.Lock()
			delete(r.attached, c.ID())
			r.mu.Unlock()
			a.detach()
		}
		task, err := c.Task(ctx, cio.Load)
		if err != nil {
			task, err = c.Task(ctx, nil) // its FIFOs are gone
		}
		if err != nil {
			continue
		}
		dctx, cancel := r.teardownCtx(ctx)
		_, err = task.Delete(dctx, ctrd.WithProcessKill)
		cancel()
		if err != nil && !errdefs.IsNotFound(err) {
			s.err(fmt.Errorf("deleting the unstarted task of container %s: %w", c.ID(), err))
			continue
		}
		n++
	}
	return n
}

// sweepUnknownTasks takes apart what is left of tasks of this data dir that containerd does not know
// (tasks lists those it does): their shims and the shims' processes, their runc containers (`runc
// init` included; runc deletes their cgroups), mounts under the state dir and bundles. It returns the
// ids it found.
func (r *Runtime) sweepUnknownTasks(tasks map[string]bool, s *sweepLog) map[string]bool {
	gone := map[string]bool{}
	shims := r.unknownShims(tasks)
	for _, sh := range shims {
		gone[sh.ID] = true
		killShim(sh)
	}
	s.add("shims", len(shims))
	runcIDs, err := r.unknownRuncContainers(tasks)
	s.err(err)
	for _, id := range runcIDs {
		gone[id] = true
		s.err(runcDelete(r.runcRoot(), id))
	}
	s.add("runc containers", len(runcIDs))
	mounts := r.unknownMounts(tasks)
	for _, m := range mounts {
		s.err(unmount(m))
	}
	s.add("mounts", len(mounts))
	bundles := r.unknownBundles(tasks)
	for _, id := range bundles {
		gone[id] = true
		s.err(r.removeBundle(id))
	}
	s.add("bundles", len(bundles))
	for id := range gone {
		// The shim's socket, named as containerd 1.6 names it (a shim of an earlier start of a private
		// containerd in a short socket dir may have had another address: its socket dir went with it).
		sum := sha256.Sum256([]byte(filepath.Join(r.address, r.ns, id)))
		_ = os.Remove(filepath.Join(shimSocketDir, hex.EncodeToString(sum[:])))
	}
	return gone
}

// shimSocketDir is where containerd 1.6 makes shims' sockets, whatever its state dir.
const shimSocketDir = "/run/containerd/s"

// runcRoot is where runc, run by containerd 1.6's runc shim, keeps the namespace's containers.
func (r *Runtime) runcRoot() string { return filepath.Join("/run/containerd/runc", r.ns) }

// taskDir holds the bundles of the namespace's tasks.
func (r *Runtime) taskDir() string {
	return filepath.Join(r.stateDir, "io.containerd.runtime.v2.task", r.ns)
}

// sweepLeases deletes the leases made before this Runtime connected: on a containerd of this data dir
// alone, they are an earlier process's, cut off before it could end them. Each deletion lets
// containerd's GC remove what only that lease held, before it returns.
func (r *Runtime) sweepLeases(ctx context.Context, s *sweepLog) int {
	ls := r.client.LeasesService()
	all, err := ls.List(ctx)
	if err != nil {
		s.err(fmt.Errorf("listing leases: %w", err))
		return 0
	}
	n := 0
	for _, l := range all {
		if !l.CreatedAt.Before(r.started) {
			continue
		}
		if err := ls.Delete(ctx, l, leases.SynchronousDelete); err != nil && !errdefs.IsNotFound(err) {
			s.err(fmt.Errorf("deleting lease %s: %w", l.ID, err))
			continue
		}
		n++
	}
	return n
}

// sweepSnapshots removes active snapshots that no container uses and no lease holds: a container's
// snapshot whose container was never made, or an unpack's `extract-…` snapshot. Snapshots are listed
// first, then leases and containers: anything made meanwhile is made under a lease listed after it.
func (r *Runtime) sweepSnapshots(ctx context.Context, s *sweepLog) int {
	sn := r.client.SnapshotService(r.snap)
	var candidates []string
	err := sn.Walk(ctx, func(_ context.Context, info snapshots.Info) error {
		if info.Kind == snapshots.KindActive {
			candidates = append(candidates, info.Name)
		}
		return nil
	})
	if err != nil {
		s.err(fmt.Errorf("listing snapshots: %w", err))
		return 0
	}
	if len(candidates) == 0 {
		return 0
	}
	held, err := r.heldSnapshots(ctx)
	if err != nil {
		s.err(err)
		return 0
	}
	n := 0
	for _, key := range candidates {
		if held[key] {
			continue
		}
		if err := sn.Remove(ctx, key); err != nil && !errdefs.IsNotFound(err) {
			s.err(fmt.Errorf("removing snapshot %s: %w", key, err))
			continue
		}
		n++
	}
	return n
}

// heldSnapshots are the snapshot keys leases hold or containers use, in the runtime's snapshotter.
func (r *Runtime) heldSnapshots(ctx context.Context) (map[string]bool, error) {
	held := map[string]bool{}
	ls := r.client.LeasesService()
	all, err := ls.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing leases: %w", err)
	}
	for _, l := range all {
		res, err := ls.ListResources(ctx, l)
		if err != nil && !errdefs.IsNotFound(err) {
			return nil, fmt.Errorf("listing the resources of lease %s: %w", l.ID, err)
		}
		for _, rs := range res {
			if rs.Type == "snapshots/"+r.snap {
				held[rs.ID] = true
			}
		}
	}
	cs, err := r.client.ContainerService().List(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing containers: %w", err)
	}
	for _, c := range cs {
		if c.Snapshotter == r.snap || c.Snapshotter == "" {
			held[c.SnapshotKey] = true
		}
	}
	return held, nil
}

// sweepCgroups removes the empty cgroups no task holds under this data dir's parent (in every
// hierarchy), and the parent itself once no task is left. On a shared containerd the parent is the
// namespace's, so only the cgroups of ids in gone are removed.
func (r *Runtime) sweepCgroups(tasks, gone map[string]bool) int {
	roots := cgroupRoots()
	n := 0
	removed := func(p string) {
		if removeCgroup(p) {
			n++
		}
	}
	if r.stateDir == "" {
		for id := range gone {
			for _, root := range roots {
				removed(filepath.Join(root, r.cgroupParent, id))
			}
		}
		return n
	}
	for _, root := range roots {
		dir := filepath.Join(root, r.cgroupParent)
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if e.IsDir() && !tasks[e.Name()] {
				removed(filepath.Join(dir, e.Name()))
			}
		}
		if len(tasks) == 0 {
			_ = os.Remove(dir)
		}
	}
	return n
}

// cgroupRemoveTimeout bounds how long removeCgroup waits for what it killed in a cgroup to be gone.
const cgroupRemoveTimeout = 5 * time.Second

// removeCgroup removes the cgroup dir, which no task of containerd holds. Processes still in it are
// what a crash left outside containerd's knowledge (a `runc init` whose shim is gone, or one still
// exiting after its shim was killed): they are killed, and the removal retried until they are gone.
// It reports whether it removed the cgroup.
func removeCgroup(dir string) bool {
	deadline := time.Now().Add(cgroupRemoveTimeout)
	for {
		err := os.Remove(dir)
		if err == nil {
			return true
		}
		if !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
			return false
		}
		for _, pid := range cgroupProcs(dir) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// cgroupProcs lists the processes in the cgroup dir.
func cgroupProcs(dir string) []int {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// cgroupRoots are the mounted cgroup hierarchies: each v1 controller's and the v2 (unified) one.
func cgroupRoots() []string {
	roots := []string{"/sys/fs/cgroup"}
	entries, _ := os.ReadDir("/sys/fs/cgroup")
	for _, e := range entries {
		p := filepath.Join("/sys/fs/cgroup", e.Name())
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			roots = append(roots, p)
		}
	}
	return roots
}

// CgroupParent is the cgroup under which containers are made: a parent per data dir, named after its
// containerd state dir, when that containerd is its own (so a sweep can tell its cgroups from other
// instances'), else the namespace's.
func CgroupParent(ns, stateDir string) string {
	if stateDir == "" {
		return "/" + ns
	}
	sum := sha256.Sum256([]byte(stateDir))
	return "/" + ns + "/" + hex.EncodeToString(sum[:])[:12]
}

// sortDeepestFirst orders paths so that a path comes before any path it lies under.
func sortDeepestFirst(paths []string) {
	sort.Slice(paths, func(i, j int) bool {
		if ci, cj := strings.Count(paths[i], "/"), strings.Count(paths[j], "/"); ci != cj {
			return ci > cj
		}
		return paths[i] < paths[j]
	})
}
