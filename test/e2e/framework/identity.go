package framework

import (
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/rayctl/rayctl/pkg/apiserver/kubeconfig"
	"github.com/rayctl/rayctl/pkg/apiserver/pki"
)

// Identity returns a REST config for user (no groups) on the instance's API server, with a client
// certificate from the instance's CA: what a component of rayctl's own identity sees.
func (in *Instance) Identity(t testing.TB, user string) *rest.Config {
	t.Helper()
	ca, err := pki.LoadOrCreate(filepath.Join(in.DataDir, "pki"))
	if err != nil {
		t.Fatal(err)
	}
	kp, err := ca.Client("test-"+strings.ReplaceAll(user, ":", "-"), user, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.NewDefaultClientConfig(*kubeconfig.Build(in.Config.Host, ca.CertPEM(), kp), nil).ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
