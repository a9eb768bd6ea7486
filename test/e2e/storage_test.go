package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestPersistentVolumeClaim: a claim naming no class gets the default local-path class, a volume is
// provisioned and bound both ways; a pod writes a file to it, and after that pod is deleted a new pod
// mounting the same claim reads the file; deleting the claim deletes the volume and its directory
// (reclaim policy Delete). A claim without access modes is refused with the field's path.
func TestPersistentVolumeClaim(t *testing.T) {
	in, ctx, ns := setup(t)
	c := in.Client

	// The class is made when the provisioner starts, which may be after the instance is ready.
	var sc *storagev1.StorageClass
	eventually(t, ctx, nodeTimeout, "the default StorageClass", func(ctx context.Context) (bool, error) {
		var err error
		sc, err = c.StorageV1().StorageClasses().Get(ctx, "local-path", metav1.GetOptions{})
		return err == nil, err
	})
	if sc.Annotations["storageclass.kubernetes.io/is-default-class"] != "true" || sc.Provisioner != "rayctl.io/local-path" {
		t.Errorf("StorageClass local-path: annotations %v, provisioner %q; want the default class of rayctl.io/local-path", sc.Annotations, sc.Provisioner)
	}
	out, _, err := in.Kubectl(ctx, "", "get", "storageclass")
	must(t, "kubectl get storageclass", err)
	if !strings.Contains(out, "local-path (default)") || !strings.Contains(out, "Immediate") {
		t.Errorf("kubectl get storageclass:\n%s\nwant local-path (default) … Immediate", out)
	}

	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("16Mi")}},
		},
	}
	_, err = c.CoreV1().PersistentVolumeClaims(ns).Create(ctx, claim, metav1.CreateOptions{})
	expectStatus(t, "a claim without access modes", err, 422, "spec.accessModes")
	claim.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	_, err = c.CoreV1().PersistentVolumeClaims(ns).Create(ctx, claim, metav1.CreateOptions{})
	must(t, "creating the claim", err)

	var pv *corev1.PersistentVolume
	eventually(t, ctx, nodeTimeout, "the claim bound to a provisioned volume", func(ctx context.Context) (bool, error) {
		got, err := c.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data", metav1.GetOptions{})
		if err != nil || got.Status.Phase != corev1.ClaimBound {
			return false, err
		}
		if got.Spec.StorageClassName == nil || *got.Spec.StorageClassName != "local-path" {
			return false, fmt.Errorf("bound claim has class %v, want local-path", got.Spec.StorageClassName)
		}
		pv, err = c.CoreV1().PersistentVolumes().Get(ctx, got.Spec.VolumeName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if ref := pv.Spec.ClaimRef; ref == nil || ref.UID != got.UID || pv.Status.Phase != corev1.VolumeBound {
			return false, nil
		}
		if q := got.Status.Capacity[corev1.ResourceStorage]; q.Cmp(resource.MustParse("16Mi")) != 0 {
			return false, fmt.Errorf("bound claim's capacity %s, want 16Mi", q.String())
		}
		return true, nil
	})
	dir := pv.Spec.HostPath.Path
	if !strings.HasPrefix(dir, in.DataDir+"/volumes/") {
		t.Errorf("the volume's directory is %s, want one under %s/volumes", dir, in.DataDir)
	}

	runClaimPod(t, ctx, ns, "writer", "echo kept-across-pods > /data/greeting")
	must(t, "deleting the writer", c.CoreV1().Pods(ns).Delete(ctx, "writer", metav1.DeleteOptions{}))
	if logs := runClaimPod(t, ctx, ns, "reader", "cat /data/greeting"); strings.TrimSpace(logs) != "kept-across-pods" {
		t.Errorf("the reader pod printed %q, want the writer's kept-across-pods", logs)
	}
	must(t, "deleting the reader", c.CoreV1().Pods(ns).Delete(ctx, "reader", metav1.DeleteOptions{}))

	must(t, "deleting the claim", c.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, "data", metav1.DeleteOptions{}))
	eventually(t, ctx, nodeTimeout, "the volume and its directory deleted with the claim", func(ctx context.Context) (bool, error) {
		if _, err := c.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return false, err
		}
		_, statErr := os.Stat(dir)
		return os.IsNotExist(statErr), nil
	})
}

// runClaimPod runs a pod mounting claim "data" at /data with script, waits for it to succeed and returns
// its log.
func runClaimPod(t *testing.T, ctx context.Context, ns, name, script string) string {
	t.Helper()
	c := shared(t).Client
	pod := nodePod(name, corev1.RestartPolicyNever, 0, nodeSh("main", script))
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}
	_, err := c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	must(t, "creating pod "+name, err)
	eventually(t, ctx, nodeTimeout, "pod "+name+" succeeded", func(ctx context.Context) (bool, error) {
		p, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil && p.Status.Phase == corev1.PodFailed {
			return false, fmt.Errorf("pod %s failed: %s", name, nodePodSummary(p))
		}
		return err == nil && p.Status.Phase == corev1.PodSucceeded, err
	})
	logs, err := c.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{}).DoRaw(ctx)
	must(t, "reading the log of "+name, err)
	return string(logs)
}
