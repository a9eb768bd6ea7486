package e2e

// The disk itself full (Linux: the data dir goes on a tmpfs mounted for the test, filled with fallocate).

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rayctl/rayctl/test/e2e/framework"
)

// TestDiskFullStopsThenRestarts puts the data dir on a small tmpfs, fills the rest of it, and writes
// ConfigMaps until etcd cannot write its database: rayctl up stops, non-zero, saying that the disk is
// full and to free space and start again. With the space freed, rayctl up starts on the same data dir
// and every acknowledged ConfigMap is there. Figures: ConfigMaps acknowledged, time from the first
// failed write to the exit. Needs root (mount).
func TestDiskFullStopsThenRestarts(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts rayctl up")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs")
	}
	disk := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=256m", "tmpfs", disk).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v: %s", err, out)
	}
	dataDir := filepath.Join(disk, "data")
	args := append(framework.ControlPlaneOnly(), "--runtime", "fake")
	in, err := framework.Start(dataDir, args...)
	// Registered first, so it runs last: after the instance is stopped and its files removed.
	t.Cleanup(func() {
		if out, err := exec.Command("umount", disk).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", disk, err, out)
		}
	})
	must(t, "starting rayctl", err)
	t.Cleanup(func() { in.Cleanup(t) })
	ctx := nodeContext(t, 5*time.Minute)
	ns := newNamespace(t, ctx, in)
	cms := in.Client.CoreV1().ConfigMaps(ns)

	// Leave 4 MiB free.
	var st syscall.Statfs_t
	must(t, "statfs", syscall.Statfs(disk, &st))
	filler := filepath.Join(disk, "filler")
	f, err := os.Create(filler)
	must(t, "creating the filler", err)
	must(t, "filling the disk", syscall.Fallocate(int(f.Fd()), 0, 0, int64(st.Bavail)*st.Bsize-4<<20))
	f.Close()

	payload := strings.Repeat("x", 512<<10)
	var acked []string
	var failedAt time.Time
	for i := 0; failedAt.IsZero(); i++ {
		if i > 100 {
			t.Fatalf("%d ConfigMaps of 512 KiB written on a disk with 4 MiB free", len(acked))
		}
		name := fmt.Sprintf("cm-%03d", i)
		_, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"v": payload}}, metav1.CreateOptions{})
		if err != nil {
			failedAt = time.Now()
			t.Logf("write %d failed: %v", i, err)
			break
		}
		acked = append(acked, name)
	}
	select {
	case <-in.Exited():
	case <-ctx.Done():
		t.Fatalf("rayctl up still runs on a full disk:\n%s", in.Output.String())
	}
	exitedIn := time.Since(failedAt)
	out := in.Output.String()
	if in.Cmd.ProcessState.ExitCode() == 0 {
		t.Errorf("rayctl up exited 0 on a full disk")
	}
	for _, want := range []string{"no space left on device", "The disk holding " + dataDir + " is full", "Free space there, then run rayctl up again"} {
		if !strings.Contains(out, want) {
			t.Errorf("rayctl up's output does not say %q:\n%s", want, out)
		}
	}

	must(t, "freeing space", os.Remove(filler))
	restarted := time.Now()
	must(t, "restarting rayctl up with space again", in.Restart())
	list, err := in.Client.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	must(t, "listing ConfigMaps", err)
	got := map[string]bool{}
	for _, cm := range list.Items {
		got[cm.Name] = cm.Data["v"] == payload
	}
	for _, name := range acked {
		if !got[name] {
			t.Errorf("ConfigMap %s, acknowledged before the disk filled, is missing or changed after the restart", name)
		}
	}
	t.Logf("figures: %d ConfigMaps of 512 KiB acknowledged; rayctl up stopped %s after the first failed write; ready again %s after the restart",
		len(acked), exitedIn.Round(time.Millisecond), time.Since(restarted).Round(time.Millisecond))
}
