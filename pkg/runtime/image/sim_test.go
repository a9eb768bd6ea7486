package image_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	ctrd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/containerd/v2/pkg/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/rayctl/rayctl/pkg/raysim/node"
	rcontainerd "github.com/rayctl/rayctl/pkg/runtime/containerd"
	"github.com/rayctl/rayctl/pkg/runtime/image"
)

var (
	buildOnce sync.Once
	rayBin    string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if rayBin != "" {
		_ = os.RemoveAll(filepath.Dir(rayBin))
	}
	os.Exit(code)
}

// staticRay builds raysim's test binary (a `ray` made of raysim.Main alone)
// without cgo, once per test run.
func staticRay(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "raysim-bin-")
		if err != nil {
			buildErr = err
			return
		}
		rayBin = filepath.Join(dir, "ray")
		cmd := exec.Command("go", "build", "-o", rayBin, "github.com/rayctl/rayctl/pkg/raysim/internal/testbin")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = errors.New(string(out))
		}
	})
	if buildErr != nil {
		t.Fatalf("building the raysim test binary: %v", buildErr)
	}
	return rayBin
}

func needBusybox(t *testing.T) {
	t.Helper()
	for _, p := range image.DefaultBusyboxPaths {
		if _, err := os.Stat(p); err == nil {
			return
		}
	}
	t.Skip("busybox-static is not installed (apt-get install -y busybox-static)")
}

type layoutFile map[string][]byte

func readLayout(t *testing.T, data []byte) layoutFile {
	t.Helper()
	out := layoutFile{}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		out[h.Name] = b
	}
}

func blob(t *testing.T, l layoutFile, digest string) []byte {
	t.Helper()
	b, ok := l["blobs/sha256/"+strings.TrimPrefix(digest, "sha256:")]
	if !ok {
		t.Fatalf("blob %s missing", digest)
	}
	return b
}

func TestBuildSimImageLayout(t *testing.T) {
	needBusybox(t)
	var buf bytes.Buffer
	ref, err := image.BuildSimImage(&buf, image.SimImageOptions{RayBinary: staticRay(t), Version: "1.2.3"})
	if err != nil {
		t.Fatal(err)
	}
	if ref != "rayctl.local/raysim:1.2.3" {
		t.Fatalf("ref %q", ref)
	}
	l := readLayout(t, buf.Bytes())
	if string(l["oci-layout"]) != `{"imageLayoutVersion":"1.0.0"}` {
		t.Fatalf("oci-layout %s", l["oci-layout"])
	}
	var idx struct {
		Manifests []image.Descriptor `json:"manifests"`
	}
	if err := json.Unmarshal(l["index.json"], &idx); err != nil || len(idx.Manifests) != 1 {
		t.Fatalf("index.json %s %v", l["index.json"], err)
	}
	if idx.Manifests[0].Annotations[image.AnnotationContainerdName] != ref {
		t.Fatalf("index entry annotations %v", idx.Manifests[0].Annotations)
	}
	var man struct {
		Config image.Descriptor   `json:"config"`
		Layers []image.Descriptor `json:"layers"`
	}
	if err := json.Unmarshal(blob(t, l, idx.Manifests[0].Digest), &man); err != nil || len(man.Layers) != 1 {
		t.Fatalf("manifest: %v", err)
	}
	var cfg image.Config
	if err := json.Unmarshal(blob(t, l, man.Config.Digest), &cfg); err != nil {
		t.Fatal(err)
	}
	gz, err := gzip.NewReader(bytes.NewReader(blob(t, l, man.Layers[0].Digest)))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]*tar.Header{}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = h
	}
	for _, name := range []string{"usr/bin/ray", "bin/busybox", "bin/bash", "bin/wget", "usr/bin/python3", "etc/passwd", "etc/group"} {
		if h := files[name]; h == nil || h.Typeflag != tar.TypeReg {
			t.Errorf("%s missing or not a file", name)
		}
	}
	for _, name := range []string{"bin/sh", "bin/nslookup", "usr/bin/env"} {
		if h := files[name]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "/bin/busybox" {
			t.Errorf("%s is not a busybox link: %+v", name, h)
		}
	}
	if h := files["usr/bin/rayctl"]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "ray" {
		t.Errorf("usr/bin/rayctl is not a link to ray when the image's ray is rayctl: %+v", h)
	}
	if h := files["tmp/"]; h == nil || h.Mode&0o1777 != 0o1777 {
		t.Errorf("/tmp is not world-writable and sticky: %+v", h)
	}
	if cfg.OS != "linux" || len(cfg.RootFS.DiffIDs) != 1 || cfg.Architecture == "" {
		t.Errorf("config %+v", cfg)
	}

	// The same inputs give the same image.
	var again bytes.Buffer
	if _, err := image.BuildSimImage(&again, image.SimImageOptions{RayBinary: staticRay(t), Version: "1.2.3"}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), again.Bytes()) {
		t.Error("two builds of the same inputs differ")
	}
}

func TestBuildSimImageErrors(t *testing.T) {
	if _, err := image.BuildSimImage(io.Discard, image.SimImageOptions{}); err == nil {
		t.Error("no ray binary accepted")
	}
	missing := filepath.Join(t.TempDir(), "busybox")
	_, err := image.BuildSimImage(io.Discard, image.SimImageOptions{RayBinary: staticRay(t), BusyboxPath: missing})
	if err == nil || !strings.Contains(err.Error(), "apt-get install -y busybox-static") {
		t.Errorf("missing busybox: %v", err)
	}
	// A dynamically linked binary (the test binary itself may be static, so use the go tool's sh-free check on /bin/ls).
	if _, err := os.Stat("/bin/ls"); err == nil {
		_, err := image.BuildSimImage(io.Discard, image.SimImageOptions{RayBinary: "/bin/ls"})
		if err == nil || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
			t.Errorf("dynamic ray binary: %v", err)
		}
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestSimImageRunsInContainerd builds the image, imports it into a private
// containerd, runs `ray start --head --block` in it the way a KubeRay pod
// does (bash -c with ulimit) and checks the dashboard and the exec probes.
func TestSimImageRunsInContainerd(t *testing.T) {
	needBusybox(t)
	if !rcontainerd.Available() {
		t.Skip("containerd is not installed (apt-get install -y containerd runc)")
	}
	if os.Geteuid() != 0 {
		t.Skip("running containers needs root")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	dir := t.TempDir()
	tarball := filepath.Join(dir, "raysim.tar")
	f, err := os.Create(tarball)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := image.BuildSimImage(f, image.SimImageOptions{RayBinary: staticRay(t), Version: "test"})
	f.Close()
	if err != nil {
		t.Fatal(err)
	}

	d, err := rcontainerd.StartPrivate(ctx, filepath.Join(dir, "ctrd"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Stop(); err != nil {
			t.Errorf("stopping containerd: %v", err)
		}
	})
	c, err := d.Client()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx = namespaces.WithNamespace(ctx, rcontainerd.Namespace)
	names, err := rcontainerd.ImportImageFile(ctx, c, tarball)
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 1 || names[0] != ref {
		t.Fatalf("imported %v, want [%s]", names, ref)
	}
	img, err := c.GetImage(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}

	// The head's temp dir is shared with the host so the test learns the ports it picked.
	state := filepath.Join(dir, "ray-state")
	if err := os.MkdirAll(state, 0o777); err != nil {
		t.Fatal(err)
	}
	// runc's state of containerd 1.6 lives under /run/containerd whatever the
	// daemon's root, so the id must not collide with other runs.
	id := fmt.Sprintf("raysim-head-%d-%d", os.Getpid(), time.Now().UnixNano())
	command := "ulimit -n 65536; ray start --head --block --dashboard-host=0.0.0.0 --port=0 --dashboard-port=0 " +
		"--dashboard-agent-listen-port=0 --metrics-export-port=0 --num-cpus=1 --temp-dir=/tmp/ray-state --disable-usage-stats"
	cont, err := c.NewContainer(ctx, id,
		ctrd.WithNewSnapshot(id+"-snapshot", img),
		ctrd.WithNewSpec(
			oci.WithImageConfig(img),
			oci.WithProcessArgs("/bin/bash", "-c", "--", command),
			oci.WithHostNamespace(specs.NetworkNamespace),
			oci.WithHostHostsFile,
			oci.WithHostResolvconf,
			oci.WithEnv([]string{"RAYSIM_BIND_HOST=127.0.0.1"}),
			oci.WithMounts([]specs.Mount{{Destination: "/tmp/ray-state", Type: "bind", Source: state, Options: []string{"rbind", "rw"}}}),
		))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cont.Delete(namespaces.WithNamespace(context.Background(), rcontainerd.Namespace), ctrd.WithSnapshotCleanup); err != nil {
			t.Errorf("deleting the container: %v", err)
		}
	})
	var out syncBuffer
	task, err := cont.NewTask(ctx, cio.NewCreator(cio.WithStreams(nil, &out, &out), cio.WithFIFODir(d.FIFODir)))
	if err != nil {
		t.Fatal(err)
	}
	exited, err := task.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		bg, cancel := context.WithTimeout(namespaces.WithNamespace(context.Background(), rcontainerd.Namespace), time.Minute)
		defer cancel()
		gone, err := task.Wait(bg)
		if err != nil {
			t.Errorf("waiting for the task: %v", err)
			return
		}
		if err := task.Kill(bg, syscall.SIGKILL, ctrd.WithKillAll); err != nil {
			t.Errorf("killing the task: %v", err)
		}
		<-gone
		if _, err := task.Delete(bg); err != nil {
			t.Errorf("deleting the task: %v", err)
		}
	})
	if err := task.Start(ctx); err != nil {
		t.Fatal(err)
	}

	var info node.HeadInfo
	deadline := time.Now().Add(60 * time.Second)
	for {
		info, err = node.ReadHeadInfo(state)
		if err == nil {
			break
		}
		select {
		case st := <-exited:
			t.Fatalf("the head exited (%d): %s", st.ExitCode(), out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the head did not come up: %s", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}

	resp, err := http.Get(info.DashboardURL + "/api/version")
	if err != nil {
		t.Fatalf("dashboard: %v\n%s", err, out.String())
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"version":"4"`) {
		t.Fatalf("dashboard /api/version: %d %s", resp.StatusCode, body)
	}

	// KubeRay-style exec probes and a job, run inside the container.
	spec, err := cont.Spec(ctx)
	if err != nil {
		t.Fatal(err)
	}
	execIn := func(name string, args ...string) (int, string) {
		t.Helper()
		p := *spec.Process
		p.Args = args
		p.Terminal = false
		var eout syncBuffer
		proc, err := task.Exec(ctx, name, &p, cio.NewCreator(cio.WithStreams(nil, &eout, &eout), cio.WithFIFODir(d.FIFODir)))
		if err != nil {
			t.Fatal(err)
		}
		defer proc.Delete(ctx)
		st, err := proc.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := proc.Start(ctx); err != nil {
			t.Fatal(err)
		}
		code := (<-st).ExitCode()
		// The I/O copy can trail the exit; wait for it to settle.
		proc.IO().Wait()
		return int(code), eout.String()
	}
	agentPort := info.AgentAddress[strings.LastIndex(info.AgentAddress, ":")+1:]
	dashPort := info.DashboardURL[strings.LastIndex(info.DashboardURL, ":")+1:]
	probe := "wget --tries 1 -T 2 -q -O- http://localhost:" + agentPort + "/api/local_raylet_healthz | grep success && " +
		"wget --tries 1 -T 10 -q -O- http://localhost:" + dashPort + "/api/gcs_healthz | grep success"
	if code, o := execIn("probe", "bash", "-c", probe); code != 0 {
		t.Fatalf("exec probe exited %d: %s", code, o)
	}
	if code, o := execIn("submit", "/bin/sh", "-c", "RAY_TMPDIR=/tmp/ray-state ray job submit -- echo hello from the image"); code != 0 || !strings.Contains(o, "hello from the image") {
		t.Fatalf("job submit in the container exited %d: %s", code, o)
	}
	if code, o := execIn("health", "ray", "health-check", "--address", info.GCSAddress); code != 0 {
		t.Fatalf("health-check in the container exited %d: %s", code, o)
	}
}
