package raycluster

import (
	"strings"
	"testing"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

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
