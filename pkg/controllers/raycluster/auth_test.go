package raycluster

import (
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
	spec.AuthOptions.EnableK8sTokenAuth = ptr.To(true)
	if err := validateAuth(spec); err == nil {
		t.Error("enableK8sTokenAuth is accepted")
	}
}
