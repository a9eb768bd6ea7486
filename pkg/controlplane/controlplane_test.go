package controlplane

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/rayctl/rayctl/pkg/apiserver/kubeconfig"
	"github.com/rayctl/rayctl/pkg/datadir"
	"github.com/rayctl/rayctl/pkg/runtime/selector"
)

// TestStartReadyStop starts a control plane in this process (no kubelet, no controllers, the fake
// runtime), writes through its API server with the admin kubeconfig, stops it, and starts it again on
// the same data dir: the object is still there, and each start printed a line per component; the second
// start writes the start-up's CPU profile it was asked for.
func TestStartReadyStop(t *testing.T) {
	dataDir := t.TempDir()
	cfg := Config{
		DataDir: dataDir, Runtime: selector.Fake, Ray: selector.RaySim, PodCIDR: "10.244.0.0/16", Bridge: "rayctltest0",
		NodeName: "test", Controllers: Controllers{Ray: []string{"none"}, Kube: []string{"none"}},
	}
	start := func() (*ControlPlane, *bytes.Buffer) {
		t.Helper()
		var out bytes.Buffer
		c := cfg
		c.Out = &out
		cp, err := New(c)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := cp.Start(ctx); err != nil {
			t.Fatalf("Start: %v\n%s", err, out.String())
		}
		select {
		case <-cp.Ready():
		default:
			t.Fatal("Start returned but Ready is open")
		}
		for _, line := range []string{"rayctl up (data dir ", "  pki ", "  etcd ", "  apiserver ", "  runtime ", "  ray ", "  pod-api ", "  dns ", "  netpolicy ", "  services ",
			"  kubelet      ", "  controllers ", "ready in "} {
			if !strings.Contains(out.String(), "\n"+line) && !strings.HasPrefix(out.String(), line) {
				t.Errorf("no line %q in:\n%s", line, out.String())
			}
		}
		if st := cp.Startup(); st.Server == "" || st.Kubeconfig != filepath.Join(dataDir, "kubeconfig") || len(st.Components) != 12 {
			t.Errorf("Startup() = %+v", st)
		}
		return cp, &out
	}
	client := func() *kubernetes.Clientset {
		t.Helper()
		rc, err := kubeconfig.RESTConfig(filepath.Join(dataDir, "kubeconfig"))
		if err != nil {
			t.Fatal(err)
		}
		return kubernetes.NewForConfigOrDie(rc)
	}

	cp, _ := start()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kept", Namespace: "default"}, Data: map[string]string{"a": "b"}}
	if _, err := client().CoreV1().ConfigMaps("default").Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cp.Stop()
	if _, err := os.Stat(filepath.Join(dataDir, "rayctl.state")); !os.IsNotExist(err) {
		t.Errorf("rayctl.state after Stop: %v", err)
	}

	// The second start is profiled (--startup-cpuprofile): the file is a gzipped profile once ready.
	profile := filepath.Join(t.TempDir(), "startup.pprof")
	cfg.StartupCPUProfile = profile
	cp, out := start() // the data dir was unlocked
	defer cp.Stop()
	if b, err := os.ReadFile(profile); err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Errorf("the start-up CPU profile: %d bytes, %v; want a gzipped pprof profile", len(b), err)
	}
	if _, err := client().CoreV1().ConfigMaps("default").Get(context.Background(), "kept", metav1.GetOptions{}); err != nil {
		t.Errorf("after a restart: %v", err)
	}
	if st, err := datadir.Open(dataDir); err != nil {
		t.Fatal(err)
	} else if s, err := st.ReadState(); err != nil || s.Server != cp.Startup().Server {
		t.Errorf("rayctl.state: %+v, %v; want server %s", s, err, cp.Startup().Server)
	}
	if !strings.Contains(out.String(), "off (--kubelet=false)") || !strings.Contains(out.String(), "controllers ") {
		t.Errorf("start-up lines:\n%s", out.String())
	}
}

// TestNewRefusesBadCapacity: a bad --node-capacity is refused before anything starts.
func TestNewRefusesBadCapacity(t *testing.T) {
	if _, err := New(Config{NodeCapacity: map[string]string{"cpu": "lots"}}); err == nil || !strings.Contains(err.Error(), "--node-capacity") {
		t.Errorf("New with cpu=lots: %v", err)
	}
}
