package raycluster

import (
	"slices"
	"strings"
	"testing"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/rayctl/rayctl/pkg/controllers/ctrlset"
	"github.com/rayctl/rayctl/pkg/rayports"
)

// TestTokenAuthEnv: with authOptions.mode token, or on the host's network unless authOptions disables
// it, every Ray container of the cluster (and the workers' GCS wait) reads the cluster's token.
func TestTokenAuthEnv(t *testing.T) {
	const head = rayports.Block(20040)
	for _, tc := range []struct {
		name  string
		auth  *rayv1.AuthOptions
		ports *PortPlan
		want  bool
	}{
		{"none", nil, nil, false},
		{"token", &rayv1.AuthOptions{Mode: rayv1.AuthModeToken}, nil, true},
		{"host network", nil, &PortPlan{Own: head, Head: head}, true},
		{"host network, disabled", &rayv1.AuthOptions{Mode: rayv1.AuthModeDisabled}, &PortPlan{Own: head, Head: head}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := sampleCluster()
			c.Spec.AuthOptions = tc.auth
			pods := []*corev1.Pod{HeadPod(c, BuildOptions{Ports: tc.ports}), WorkerPod(c, &c.Spec.WorkerGroupSpecs[0], BuildOptions{Ports: tc.ports})}
			for _, p := range pods {
				for _, ctr := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers[0]) {
					mode, hasMode := env(&ctr, EnvAuthMode)
					token, hasToken := env(&ctr, EnvAuthToken)
					if hasMode != tc.want || hasToken != tc.want {
						t.Errorf("%s/%s: %s set %v, %s set %v; want %v", p.GenerateName, ctr.Name, EnvAuthMode, hasMode, EnvAuthToken, hasToken, tc.want)
						continue
					}
					if tc.want && (mode.Value != "token" || token.ValueFrom.SecretKeyRef.Name != "demo" || token.ValueFrom.SecretKeyRef.Key != AuthTokenKey) {
						t.Errorf("%s/%s: %+v %+v", p.GenerateName, ctr.Name, mode, token.ValueFrom.SecretKeyRef)
					}
				}
			}
		})
	}
}

// TestK8sTokenAuthPods: with authOptions.enableK8sTokenAuth every Ray container of the cluster (and the
// workers' GCS wait) gets RAY_AUTH_MODE token and RAY_ENABLE_K8S_TOKEN_AUTH true, no Secret's token, and
// the pod's service account token projected at Ray's path, as KubeRay v1.7 sets them up; the Ray
// containers know the cluster's namespace (RAY_CLUSTER_NAMESPACE), which Ray's access review names.
func TestK8sTokenAuthPods(t *testing.T) {
	c := sampleCluster()
	c.Spec.AuthOptions = &rayv1.AuthOptions{Mode: rayv1.AuthModeToken, EnableK8sTokenAuth: ptr.To(true)}
	for _, p := range []*corev1.Pod{HeadPod(c, BuildOptions{}), WorkerPod(c, &c.Spec.WorkerGroupSpecs[0], BuildOptions{})} {
		var vols []corev1.Volume
		for _, v := range p.Spec.Volumes {
			if v.Name == RayTokenVolume {
				vols = append(vols, v)
			}
		}
		if len(vols) != 1 || vols[0].Projected == nil || len(vols[0].Projected.Sources) != 1 ||
			vols[0].Projected.Sources[0].ServiceAccountToken == nil || vols[0].Projected.Sources[0].ServiceAccountToken.Path != "token" {
			t.Errorf("%s: ray-token volumes %+v; want one projecting the service account token at token", p.GenerateName, vols)
		}
		for _, ctr := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers[0]) {
			mode, _ := env(&ctr, EnvAuthMode)
			k8s, _ := env(&ctr, EnvK8sTokenAuth)
			_, hasToken := env(&ctr, EnvAuthToken)
			mounted := slices.ContainsFunc(ctr.VolumeMounts, func(m corev1.VolumeMount) bool {
				return m.Name == RayTokenVolume && m.MountPath == RayTokenMountPath && m.ReadOnly
			})
			if mode.Value != "token" || k8s.Value != "true" || hasToken || !mounted {
				t.Errorf("%s/%s: mode %q, k8s %q, RAY_AUTH_TOKEN set %v, ray-token mounted %v", p.GenerateName, ctr.Name, mode.Value, k8s.Value, hasToken, mounted)
			}
		}
		if ns, ok := env(&p.Spec.Containers[0], "RAY_CLUSTER_NAMESPACE"); !ok || ns.ValueFrom == nil || ns.ValueFrom.FieldRef.FieldPath != "metadata.namespace" {
			t.Errorf("%s: RAY_CLUSTER_NAMESPACE %+v", p.GenerateName, ns)
		}
	}
}

// TestK8sTokenAuthWithoutMountPaths: where pods do not get their volumes at their mountPaths (the
// host-process runtime without mount namespaces), a cluster with enableK8sTokenAuth is refused with the
// reason (the UnsupportedNode Warning, and no pods); elsewhere, and without it, it is not.
func TestK8sTokenAuthWithoutMountPaths(t *testing.T) {
	c := sampleCluster()
	c.Spec.RayVersion = "2.60.0"
	c.Spec.AuthOptions = &rayv1.AuthOptions{Mode: rayv1.AuthModeToken, EnableK8sTokenAuth: ptr.To(true)}
	unplaced := newReconciler(nil, ctrlset.Env{PodMountsUnplaced: true}, BuildOptions{})
	if err := unplaced.unsupported(c); err == nil || !strings.Contains(err.Error(), "authOptions.enableK8sTokenAuth") ||
		!strings.Contains(err.Error(), "/var/run/secrets/kubernetes.io/serviceaccount") {
		t.Errorf("without mount paths: %v; want the field and the paths Ray reads", err)
	}
	if err := newReconciler(nil, ctrlset.Env{}, BuildOptions{}).unsupported(c); err != nil {
		t.Errorf("with mount namespaces: %v", err)
	}
	c.Spec.AuthOptions.EnableK8sTokenAuth = nil
	if err := unplaced.unsupported(c); err != nil {
		t.Errorf("mode token alone, without mount paths: %v", err)
	}
}

func TestValidateAuth(t *testing.T) {
	spec := &rayv1.RayClusterSpec{AuthOptions: &rayv1.AuthOptions{Mode: rayv1.AuthModeToken}}
	for v, ok := range map[string]bool{"": false, "2.46.0": false, "2.52.0": true, "2.60.0": true, "x": false} {
		spec.RayVersion = v
		if err := validateAuth(spec); (err == nil) != ok {
			t.Errorf("rayVersion %q: %v", v, err)
		}
	}
	// enableK8sTokenAuth, as KubeRay v1.7 checks it: Ray 2.55 or later, mode token, no secretName.
	k8s := func(mode rayv1.AuthMode, version, secret string) *rayv1.RayClusterSpec {
		ao := &rayv1.AuthOptions{Mode: mode, EnableK8sTokenAuth: ptr.To(true)}
		if secret != "" {
			ao.SecretName = ptr.To(secret)
		}
		return &rayv1.RayClusterSpec{RayVersion: version, AuthOptions: ao}
	}
	for _, tc := range []struct {
		name string
		spec *rayv1.RayClusterSpec
		want string
	}{
		{"Ray 2.60", k8s(rayv1.AuthModeToken, "2.60.0", ""), ""},
		{"Ray 2.53", k8s(rayv1.AuthModeToken, "2.53.0", ""), "authOptions.enableK8sTokenAuth needs Ray 2.55.0 or later"},
		{"secretName", k8s(rayv1.AuthModeToken, "2.60.0", "mine"), "authOptions.enableK8sTokenAuth and authOptions.secretName cannot both be set"},
		{"mode disabled", k8s(rayv1.AuthModeDisabled, "2.60.0", ""), "authOptions.enableK8sTokenAuth needs authOptions.mode token"},
	} {
		err := validateAuth(tc.spec)
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("enableK8sTokenAuth, %s: %v, want %q", tc.name, err, tc.want)
		}
	}
}
