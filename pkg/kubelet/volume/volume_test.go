package volume_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rayctl/rayctl/pkg/kubelet/podenv"
	"github.com/rayctl/rayctl/pkg/kubelet/volume"
)

// sources serves one ConfigMap and issues numbered tokens, recording what was asked.
type sources struct {
	asked []*authenticationv1.TokenRequest
}

func (s *sources) ConfigMap(_ context.Context, ns, name string) (*corev1.ConfigMap, error) {
	if name != "kube-root-ca.crt" {
		return nil, apierrors.NewNotFound(corev1.Resource("configmaps"), name)
	}
	return &corev1.ConfigMap{Data: map[string]string{"ca.crt": "CA"}}, nil
}

func (s *sources) Secret(_ context.Context, ns, name string) (*corev1.Secret, error) {
	return nil, apierrors.NewNotFound(corev1.Resource("secrets"), name)
}

func (s *sources) PersistentVolumeClaim(_ context.Context, ns, name string) (*corev1.PersistentVolumeClaim, error) {
	return nil, apierrors.NewNotFound(corev1.Resource("persistentvolumeclaims"), name)
}

func (s *sources) PersistentVolume(_ context.Context, name string) (*corev1.PersistentVolume, error) {
	return nil, apierrors.NewNotFound(corev1.Resource("persistentvolumes"), name)
}

func (s *sources) ServiceAccountToken(_ context.Context, ns, name string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	s.asked = append(s.asked, req)
	out := req.DeepCopy()
	out.Status.Token = ns + "/" + name + "#" + string(rune('0'+len(s.asked)))
	out.Status.ExpirationTimestamp = metav1.NewTime(time.Now().Add(time.Duration(*req.Spec.ExpirationSeconds) * time.Second))
	return out, nil
}

func TestProjectedServiceAccountToken(t *testing.T) {
	seconds := int64(3600)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "uid-1"}, Spec: corev1.PodSpec{
		ServiceAccountName: "robot",
		Volumes: []corev1.Volume{{Name: "api", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{ExpirationSeconds: &seconds, Path: "token"}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}}},
		}}}}},
	}}
	src := &sources{}
	dir := t.TempDir()
	start := time.Now()
	paths, renew, err := volume.Setup(context.Background(), podenv.Input{Pod: pod, Sources: src}, dir)
	if err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{"token": "ns/robot#1", "ca.crt": "CA", "namespace": "ns"} {
		if b, err := os.ReadFile(filepath.Join(paths["api"], file)); err != nil || string(b) != want {
			t.Errorf("%s: %q (%v), want %q", file, b, err, want)
		}
	}
	if len(src.asked) != 1 {
		t.Fatalf("%d token requests, want 1", len(src.asked))
	}
	if ref := src.asked[0].Spec.BoundObjectRef; ref == nil || ref.Kind != "Pod" || ref.Name != "p" || ref.UID != "uid-1" {
		t.Errorf("the token is not bound to the pod: %+v", ref)
	}
	// Renewed at 80% of the hour: 48 minutes on.
	if d := renew.Sub(start); d < 47*time.Minute || d > 49*time.Minute {
		t.Errorf("renewal in %s, want 48m", d)
	}
	if _, _, err := volume.Setup(context.Background(), podenv.Input{Pod: pod, Sources: src}, dir); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(paths["api"], "token")); string(b) != "ns/robot#2" {
		t.Errorf("after a second Setup the token is %q, want the new one", b)
	}
}
