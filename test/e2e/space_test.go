package e2e

// Out of space. etcd's database quota reached: writes fail with an error that says so and what to do;
// once objects are deleted rayctl reclaims the space and writes work again, with nothing acknowledged
// lost and the controllers working. The disk itself full (space_linux_test.go): rayctl up stops, saying so, and starts again
// with every acknowledged object once there is space.

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/rayctl/rayctl/test/e2e/framework"
)

// TestEtcdQuotaExceededThenRecovers runs rayctl with a 16 MiB etcd quota and fills it with ConfigMaps
// until writes fail, and keeps it full until the controllers' leader Leases are lost (their renewals
// fail too). Every failed write says that rayctl's etcd is out of space, its quota and the flag; an
// object whose write failed is absent or stored whole. After the big ConfigMaps are deleted, writes
// succeed again within a bounded wait, the small ConfigMaps written before are all intact, and the
// controllers work again: a Job gets its pod, a RayCluster its head pod. Figures: ConfigMaps stored,
// time from the deletions to the first accepted write, time to the controllers acting.
func TestEtcdQuotaExceededThenRecovers(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts rayctl up")
	}
	const quota = 16 << 20
	in, err := framework.Start("", "--runtime", "fake", "--etcd-quota-bytes", fmt.Sprint(quota))
	must(t, "starting rayctl", err)
	t.Cleanup(func() { in.Cleanup(t) })
	ctx := nodeContext(t, 6*time.Minute)
	ns := newNamespace(t, ctx, in)
	cms := in.Client.CoreV1().ConfigMaps(ns)

	// Small objects that must survive it all.
	kept := map[string]string{}
	for i := range 20 {
		name := fmt.Sprintf("kept-%02d", i)
		_, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"v": name}}, metav1.CreateOptions{})
		must(t, "creating "+name, err)
		kept[name] = name
	}

	// Fill: 512 KiB ConfigMaps until a write fails. rayctl may reclaim room after a failure (old
	// revisions compacted away); fill on until the database stays full and the controllers' Leases are
	// lost, which rayctl logs.
	var big, refused []string
	var firstErr error
	// Each ConfigMap's 512 KiB of data is made from its name, so a stored one can be checked whole.
	payload := func(name string) string {
		sum := sha256.Sum256([]byte(name))
		return strings.Repeat(base64.StdEncoding.EncodeToString(sum[:]), (512<<10)/44)
	}
	logPath := filepath.Join(in.DataDir, "rayctl.log")
	start := time.Now()
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		// What rayctl did about the space, for the failure's reader.
		b, _ := os.ReadFile(logPath)
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, "reclaim") || strings.Contains(l, "defragment") || strings.Contains(l, "NOSPACE") ||
				strings.Contains(l, "controller manager") || strings.Contains(l, "alarm") || strings.Contains(l, "compact") {
				t.Log(l)
			}
		}
	})
	managersStopped := func() bool {
		b, _ := os.ReadFile(logPath)
		return strings.Count(string(b), "controller manager stopped") >= 2
	}
	for i := 0; !managersStopped(); i++ {
		if i > 200 {
			t.Fatalf("%d ConfigMaps of 512 KiB written and the controllers' Leases still not lost", len(big))
		}
		name := fmt.Sprintf("big-%03d", i)
		_, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"v": payload(name)}}, metav1.CreateOptions{})
		if err == nil {
			big = append(big, name)
			continue
		}
		refused = append(refused, name)
		if firstErr == nil {
			firstErr = err
			t.Logf("the first refused write, after %d ConfigMaps of 512 KiB: %v", len(big), err)
		}
		// Refused for want of space, and saying so.
		var status apierrors.APIStatus
		if !errors.As(err, &status) || !strings.Contains(err.Error(), "rayctl's etcd is out of space") ||
			!strings.Contains(err.Error(), "16.0 MiB") || !strings.Contains(err.Error(), "--etcd-quota-bytes") {
			t.Fatalf("writing %s: %v; want an API error that says etcd is out of space, its quota and the flag", name, err)
		}
		// Either rayctl makes room (the next write passes) or the database stays full until the
		// controllers' Leases expire.
		framework.WaitFor(t, ctx, "the database staying full until the controllers' Leases are lost, or room again", func() (bool, error) {
			if managersStopped() {
				return true, nil
			}
			_, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe"}}, metav1.CreateOptions{})
			if err == nil {
				return true, cms.Delete(ctx, "probe", metav1.DeleteOptions{})
			}
			if apierrors.IsAlreadyExists(err) {
				// An earlier probe was the write that crossed the quota: refused, yet stored (see
				// below). Delete it (etcd takes deletes while full) and probe again.
				if err := cms.Delete(ctx, "probe", metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
					return false, err
				}
				return false, nil
			}
			return false, err
		})
	}
	if firstErr == nil {
		t.Fatal("no write was refused")
	}
	var status apierrors.APIStatus
	errors.As(firstErr, &status)
	code := status.Status().Code
	if code != http.StatusInsufficientStorage || strings.Contains(firstErr.Error(), "rpc error") {
		t.Errorf("a write refused for want of space: HTTP %d %q, want 507 with rayctl's message alone", code, firstErr)
	}
	t.Logf("stored %d ConfigMaps of 512 KiB, %d refused (HTTP %d); the controller managers lost their Leases", len(big), len(refused), code)

	// Reading still works, and no refused object was half-written. (etcd applies the one write that
	// crosses the quota before it reports the quota exceeded, so this refusal does not prove the
	// object absent.)
	var storedAnyway []string
	for _, name := range refused {
		cm, err := cms.Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			t.Errorf("reading %s: %v", name, err)
		case cm.Data["v"] != payload(name):
			t.Errorf("%s, whose create was refused, is stored with other data (%d bytes)", name, len(cm.Data["v"]))
		default:
			storedAnyway = append(storedAnyway, name)
			big = append(big, name) // to be deleted with the others
		}
	}
	if len(storedAnyway) > 0 {
		t.Logf("refused yet stored whole (the write that crossed the quota): %v", storedAnyway)
	}

	t.Logf("%s: full, the controller managers stopped; deleting", time.Since(start).Round(time.Millisecond))
	// The recovery gets a time budget of its own, whatever filling took on a busy machine.
	ctx = nodeContext(t, 4*time.Minute)
	// Delete the big ones: deletes pass while etcd is full. Then writes work again.
	for _, name := range big {
		must(t, "deleting "+name, cms.Delete(ctx, name, metav1.DeleteOptions{}))
	}
	deleted := time.Now()
	framework.WaitFor(t, ctx, "a write accepted after the deletions", func() (bool, error) {
		_, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after"}, Data: map[string]string{"v": payload("after")}}, metav1.CreateOptions{})
		return err == nil, err
	})
	recovered := time.Since(deleted)

	// Nothing acknowledged was lost.
	list, err := cms.List(ctx, metav1.ListOptions{})
	must(t, "listing ConfigMaps", err)
	got := map[string]string{}
	for _, cm := range list.Items {
		got[cm.Name] = cm.Data["v"]
	}
	for name, v := range kept {
		if got[name] != v {
			t.Errorf("ConfigMap %s: %q, want %q", name, got[name], v)
		}
	}
	for _, name := range big {
		if _, ok := got[name]; ok {
			t.Errorf("ConfigMap %s is still there after its deletion", name)
		}
	}

	// The controllers are back: the Job controller makes a Job's pod, the RayCluster controller a
	// cluster's head pod.
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "after"}, Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "main", Image: "busybox:1.36"}}}}}}
	_, err = in.Client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{})
	must(t, "creating a Job", err)
	dyn, err := dynamic.NewForConfig(in.Config)
	must(t, "a dynamic client", err)
	_, err = dyn.Resource(framework.RayClusters).Namespace(ns).Create(ctx, framework.RayCluster("after"), metav1.CreateOptions{})
	must(t, "creating a RayCluster", err)
	framework.WaitFor(t, ctx, "the Job's pod and the RayCluster's head pod", func() (bool, error) {
		jobPods, err := in.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "job-name=after"})
		if err != nil {
			return false, err
		}
		heads, err := in.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "ray.io/cluster=after,ray.io/node-type=head"})
		if err != nil {
			return false, err
		}
		return len(jobPods.Items) > 0 && len(heads.Items) > 0, fmt.Errorf("%d Job pods, %d head pods", len(jobPods.Items), len(heads.Items))
	})
	t.Logf("figures: %d ConfigMaps of 512 KiB stored before writes stayed refused (16 MiB quota); writes accepted again %s after the deletions; the controllers acted again %s after them",
		len(big), recovered.Round(time.Millisecond), time.Since(deleted).Round(time.Millisecond))
}
