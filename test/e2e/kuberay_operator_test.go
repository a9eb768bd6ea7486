package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/rayctl/rayctl/pkg/apiserver/kubeconfig"
	"github.com/rayctl/rayctl/pkg/apiserver/pki"
	"github.com/rayctl/rayctl/test/e2e/framework"
)

// kuberayUser is the operator's own identity, bound by testdata/kuberay/operator-rbac.yaml.
const kuberayUser = "kuberay-operator"

// kuberayErrorsNotOurs are the error lines KubeRay logs on any cluster, whatever the API server does: a
// status write from a stale cache meets a conflict (the API's optimistic concurrency, as designed); v1.5's
// RayJob controller creates its RayCluster again when its cache has not yet seen the first creation (the
// API's AlreadyExists, as designed); and in K8sJobMode the operator asks the dashboard for the job before
// its submitter Job has submitted it.
var kuberayErrorsNotOurs = []string{
	"the object has been modified; please apply your changes to the latest version",
	"already exists",
	"does not exist on the cluster",
}

// TestKubeRayOperator runs KubeRay's unmodified operator (built from its Go module at hack/kuberay-version)
// against `rayctl up --controllers=none --ray=sim`, under its own identity with the RBAC its markers ask
// for: the sample RayCluster with a worker becomes ready, RayJobs complete in HTTPMode and in K8sJobMode,
// deleting the RayCluster removes its pods (rayctl's garbage collector), and the operator logs no error
// from our API. The identity can also watch PersistentVolumeClaims, which KubeRay v1.7 watches at start.
func TestKubeRayOperator(t *testing.T) {
	t.Parallel()
	operator, in := kuberaySimInstance(t)
	out, stderr, err := in.Kubectl(t.Context(), "", "apply", "-f", filepath.Join(testdataDir(), "kuberay", "operator-rbac.yaml"))
	must(t, "binding the operator's role: "+out+stderr, err)
	kc := operatorKubeconfig(t, in)
	// Started before the test's namespace exists, the operator stops after its deletion (cleanups run last
	// in, first out): it removes its finalizers from the RayJobs there.
	log := startOperator(t, operator, kc, "default")
	e := newRayEnv(t, in)
	ctx := e.ctx

	for _, sample := range []string{"raycluster.yaml", "rayjob-http.yaml", "rayjob-k8sjob.yaml"} {
		out, stderr, err := in.Kubectl(ctx, "", "apply", "-n", e.ns, "-f", samplePath(sample))
		must(t, "applying "+sample+": "+out+stderr, err)
	}
	e.waitClusterReady(t, "raycluster-sample", 1)
	for _, name := range []string{"rayjob-http", "rayjob-k8sjob"} {
		j := e.waitJobFinished(t, name)
		if j.Status.JobDeploymentStatus != rayv1.JobDeploymentStatusComplete || j.Status.JobStatus != rayv1.JobStatusSucceeded {
			t.Errorf("RayJob %s ended %s/%s: %s", name, j.Status.JobDeploymentStatus, j.Status.JobStatus, j.Status.Message)
		}
	}
	submitter, err := in.Client.BatchV1().Jobs(e.ns).Get(ctx, "rayjob-k8sjob", metav1.GetOptions{})
	must(t, "reading the K8sJobMode submitter Job", err)
	if submitter.Status.Succeeded != 1 {
		t.Errorf("the K8sJobMode submitter Job has %d succeeded pods, want 1", submitter.Status.Succeeded)
	}

	must(t, "deleting the RayCluster", e.ray.RayV1().RayClusters(e.ns).Delete(ctx, "raycluster-sample", metav1.DeleteOptions{}))
	e.waitFor(t, rayTimeout, "the RayCluster's pods collected", func(ctx context.Context) (bool, string, error) {
		pods, err := in.Client.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: "ray.io/cluster=raycluster-sample"})
		if err != nil {
			return false, "", err
		}
		return len(pods.Items) == 0, "pods " + podsState(pods.Items), nil
	})

	watchClaimsAs(t, ctx, kc, e.ns)
	ours, excused := log.errors()
	for _, line := range ours {
		t.Errorf("the operator logged an error: %s", line)
	}
	t.Logf("the operator logged %d error lines KubeRay logs on any cluster (conflicts, creations its cache missed, a job not yet submitted)", excused)
}

// kuberaySimInstance returns KubeRay's operator binary and a `rayctl up --controllers=none --ray=sim`
// for it to run against, stopped when the test ends.
func kuberaySimInstance(t *testing.T) (operator string, in *framework.Instance) {
	t.Helper()
	operator = kuberayOperator(t)
	in, err := framework.Start("", "--controllers=none", "--ray=sim", "--node-capacity", "cpu=8,memory=16Gi")
	if err != nil {
		t.Fatalf("rayctl up: %v", err)
	}
	t.Cleanup(func() { in.Cleanup(t) })
	return operator, in
}

// testdataDir is test/e2e/testdata.
func testdataDir() string {
	_, file, _, _ := goruntime.Caller(0)
	return filepath.Join(filepath.Dir(file), "testdata")
}

// kuberayOperator returns the operator binary `make kuberay-operator` builds (and builds it when missing;
// the first build fetches KubeRay's module through the proxy and takes minutes on 2 cores): the version
// hack/kuberay-version names, or $KUBERAY_VERSION.
func kuberayOperator(t *testing.T) string {
	t.Helper()
	root := filepath.Join(testdataDir(), "..", "..", "..")
	version := os.Getenv("KUBERAY_VERSION")
	if version == "" {
		b, err := os.ReadFile(filepath.Join(root, "hack", "kuberay-version"))
		must(t, "reading hack/kuberay-version", err)
		version = strings.TrimSpace(string(b))
	}
	t.Logf("KubeRay operator %s", version)
	bin := filepath.Join(root, "_output", "tools", "kuberay-operator-"+version)
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	cmd := exec.Command("make", "-s", "kuberay-operator", "KUBERAY_VERSION="+version)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make kuberay-operator: %v\n%s", err, out)
	}
	return bin
}

// operatorKubeconfig writes a kubeconfig for the operator's identity: a client certificate from the
// instance's CA for user kuberay-operator.
func operatorKubeconfig(t *testing.T, in *framework.Instance) string {
	t.Helper()
	return userKubeconfig(t, in, kuberayUser)
}

// userKubeconfig writes a kubeconfig for user (no groups): a client certificate from the instance's CA.
func userKubeconfig(t *testing.T, in *framework.Instance, user string) string {
	t.Helper()
	ca, err := pki.LoadOrCreate(filepath.Join(in.DataDir, "pki"))
	must(t, "loading the instance's CA", err)
	kp, err := ca.Client("e2e-"+user, user, nil)
	must(t, "minting the certificate of "+user, err)
	path := filepath.Join(t.TempDir(), "kubeconfig")
	must(t, "writing the kubeconfig of "+user, kubeconfig.Write(path, kubeconfig.Build(in.Config.Host, ca.CertPEM(), kp)))
	return path
}

// operatorLog collects the operator's JSON log lines.
type operatorLog struct {
	mu    sync.Mutex
	lines []string
	// stop stops the operator (SIGTERM) and waits for it; later calls do nothing.
	stop func()
}

// errors returns the lines logged at level error, but those KubeRay logs on any cluster, which it counts.
func (l *operatorLog) errors() (ours []string, excused int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		var entry struct {
			Level string `json:"level"`
		}
		if json.Unmarshal([]byte(line), &entry) != nil || entry.Level != "error" {
			continue
		}
		if slices.ContainsFunc(kuberayErrorsNotOurs, func(s string) bool { return strings.Contains(line, s) }) {
			excused++
			continue
		}
		ours = append(ours, line)
	}
	return ours, excused
}

// startOperator runs the operator with its default flags but three the test needs, and stops it (SIGTERM)
// when the test ends, logging its output if the test failed:
//   - --use-kubernetes-proxy: the operator runs on the host, where the head service's cluster DNS name
//     (<cluster>-head-svc.<ns>.svc.cluster.local) does not resolve; it reaches the dashboard through the API
//     server's services/proxy instead.
//   - --leader-election-namespace: leader election is on by default and, outside a pod, needs a namespace.
//   - --metrics-addr=0 --health-probe-bind-address=0: its default :8080/:8082 would collide with other tests.
//
// args come after those (a later flag wins).
func startOperator(t *testing.T, bin, kubeconfigPath, ns string, args ...string) *operatorLog {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"--use-kubernetes-proxy", "--leader-election-namespace=" + ns,
		"--metrics-addr=0", "--health-probe-bind-address=0"}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfigPath)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	must(t, "the operator's stdout", err)
	cmd.Stderr = cmd.Stdout
	must(t, "starting the KubeRay operator", cmd.Start())
	log := &operatorLog{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		s := bufio.NewScanner(stdout)
		s.Buffer(make([]byte, 1<<20), 1<<20)
		for s.Scan() {
			log.mu.Lock()
			log.lines = append(log.lines, s.Text())
			log.mu.Unlock()
		}
	}()
	log.stop = sync.OnceFunc(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		_ = cmd.Wait()
	})
	t.Cleanup(func() {
		log.stop()
		if t.Failed() {
			log.mu.Lock()
			lines := log.lines
			if len(lines) > 200 {
				lines = lines[len(lines)-200:]
			}
			t.Logf("the operator's log (last %d lines):\n%s", len(lines), strings.Join(lines, "\n"))
			log.mu.Unlock()
		}
	})
	return log
}

// watchClaimsAs opens a watch on PersistentVolumeClaims with the operator's identity, as KubeRay v1.7's
// RayCluster controller does at start (it Owns them), and sees a claim created in ns arrive.
func watchClaimsAs(t *testing.T, ctx context.Context, kubeconfigPath, ns string) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfigPath)
	must(t, "the operator's REST config", err)
	c, err := kubernetes.NewForConfig(cfg)
	must(t, "the operator's client", err)
	w, err := c.CoreV1().PersistentVolumeClaims("").Watch(ctx, metav1.ListOptions{})
	must(t, "watching PersistentVolumeClaims as the operator", err)
	defer w.Stop()
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "ray-logs", Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")}},
		},
	}
	_, err = c.CoreV1().PersistentVolumeClaims(ns).Create(ctx, claim, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating a claim as the operator: %v", err)
	}
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("the claims watch closed before the claim arrived")
			}
			if pvc, isPVC := ev.Object.(*corev1.PersistentVolumeClaim); isPVC && pvc.Name == claim.Name && pvc.Namespace == ns {
				return
			}
		case <-ctx.Done():
			t.Fatalf("the claim did not arrive on the operator's watch: %v", ctx.Err())
		}
	}
}
