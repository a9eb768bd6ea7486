package main

// The rayjob suite: how long a RayJob takes from apply to Complete on a fresh `rayctl up`: raysim's
// sample on the containerd runtime and on the process runtime, and the real-Ray sample
// (configs/samples/rayjob-real.yaml) on the host's Ray with the process runtime — and the Ray pods' RSS.
//
// Each runtime gets its own `rayctl up` (free API port, own data dir, pod CIDR and bridge). One warm-up
// RayJob runs first (it waits for the raysim image to be loaded into the runtime) and is reported apart;
// then each measured run creates the sample RayJob (configs/samples/rayjob-k8sjob.yaml: 1 head + 1 worker,
// the default K8sJobMode, with a trivial entrypoint and the cluster kept after the job), watches the RayJob
// and its RayCluster, reads the job's submission time from the head's dashboard, then deletes the RayJob
// and waits until the namespace has no pods left before the next run.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/moby/sys/mountinfo"
	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	rayclient "github.com/ray-project/kuberay/ray-operator/pkg/client/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/rayctl/rayctl/pkg/instance"
	"github.com/rayctl/rayctl/pkg/runtime/network"
)

// rayjobGoal is the goal for apply → Complete on containerd, printed in the table.
const rayjobGoal = "≤ 3 s on containerd"

// rayjobSample is one measured RayJob.
type rayjobSample struct {
	complete     time.Duration    // create → jobDeploymentStatus Complete (watch)
	clusterReady time.Duration    // create → RayCluster state ready (watch)
	submitted    time.Duration    // RayCluster ready → the job's start_time on the dashboard
	finish       time.Duration    // the job's start_time → RayJob Complete
	rss          int64            // the RayCluster's pods' resident memory once Complete (sum over their processes), bytes
	rssByKind    map[string]int64 // rss by kind of Ray process (procKind)
	applied      time.Time        // when the create request was sent
	jobStart     time.Time        // the job's start_time on the dashboard
	jobEnd       time.Time        // the job's end_time on the dashboard (zero when it lists none)
}

// rayjobConfig is one configuration the suite measures.
type rayjobConfig struct {
	label  string   // what the table calls it
	args   []string // `rayctl up` arguments
	sample string   // the sample RayJob's file in the samples dir
	real   bool     // real Ray: the sample's driver runs as it is (else its entrypoint is `echo hello`)
	runs   int
}

// rayjobResult is one configuration's figures.
type rayjobResult struct {
	rayjobConfig
	chosen  string // what `rayctl up` said it runs
	warmup  time.Duration
	samples []rayjobSample
	load    [2]string // the 1-minute load average before and after the measured runs
}

func runRayJob(rayctl, out, samples string, runs, realRuns int) error {
	load := loadAverage()
	var results []rayjobResult
	for _, c := range []rayjobConfig{
		{label: "containerd, raysim", args: []string{"--runtime=containerd"}, sample: "rayjob-k8sjob.yaml", runs: runs},
		{label: "process, raysim", args: []string{"--runtime=process"}, sample: "rayjob-k8sjob.yaml", runs: runs},
		{label: "process, real Ray", args: []string{"--runtime=process", "--ray=host"}, sample: "rayjob-real.yaml", real: true, runs: realRuns},
	} {
		r, err := rayjobRuntime(rayctl, samples, c)
		if err != nil {
			return fmt.Errorf("rayjob on %s: %w", c.label, err)
		}
		results = append(results, r)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# RayJob apply → Complete (`make bench`, suite rayjob)\n\n")
	fmt.Fprintf(&b, "Measured %s, after one warm-up run per configuration: %d runs on raysim, %d on real Ray. Machine: %s.\n\n", time.Now().UTC().Format("2006-01-02 15:04 MST"), runs, realRuns, machine())
	fmt.Fprintf(&b, "On raysim the RayJob is configs/samples/rayjob-k8sjob.yaml (default K8sJobMode: a submitter Job runs `ray job submit`; 1 head + 1 worker, raysim image) with the entrypoint `echo hello`. ")
	fmt.Fprintf(&b, "On real Ray it is configs/samples/rayjob-real.yaml (K8sJobMode, 1 head + 1 worker, rayproject/ray:2.60.0 run on the host's Ray 2.60.0 from `make ray`; its Python driver runs a task and an actor). ")
	fmt.Fprintf(&b, "The cluster is kept after the job. Each configuration has its own fresh `rayctl up`; every run starts on an empty node (the previous RayJob deleted and its pods gone).\n\n")
	fmt.Fprintf(&b, "| configuration | measurement | p50 | p90 | min | max | goal |\n|---|---|---|---|---|---|---|\n")
	res := suiteResult{Suite: "rayjob", Title: "RayJob apply → Complete", Machine: machine() + "; load average " + load + " when the suite started"}
	complete := plotSpec{File: "rayjob-complete.png", Title: "RayJob apply → Complete", Kind: "cdf", XLabel: "ms"}
	var phasePlots []plotSpec
	for _, r := range results {
		rows := []struct {
			name string
			get  func(rayjobSample) time.Duration
			goal string
		}{
			{"apply → RayJob Complete", func(s rayjobSample) time.Duration { return s.complete }, ""},
			{"apply → RayCluster ready", func(s rayjobSample) time.Duration { return s.clusterReady }, ""},
			{"RayCluster ready → job submitted", func(s rayjobSample) time.Duration { return s.submitted }, ""},
			{"job submitted → RayJob Complete", func(s rayjobSample) time.Duration { return s.finish }, ""},
		}
		p50 := percentile(r.rows(rows[0].get), 0.5)
		if r.label == "containerd, raysim" {
			met := p50 <= 3*time.Second
			rows[0].goal = rayjobGoal + " " + mark(met)
			res.Figures = append(res.Figures, goalFigure("RayJob apply → Complete p50, "+r.label, ms(p50), "≤ 3 s", met))
		} else {
			res.Figures = append(res.Figures, figure{Name: "RayJob apply → Complete p50, " + r.label, Value: ms(p50)})
		}
		complete.Series = append(complete.Series, series{Name: r.label, Values: msValues(r.rows(rows[0].get))})
		phases := plotSpec{File: "rayjob-phases-" + slug(r.label) + ".png", Title: "RayJob phases, " + r.label, Kind: "cdf", XLabel: "ms"}
		for _, row := range rows {
			v := r.rows(row.get)
			if row.name != rows[0].name {
				phases.Series = append(phases.Series, series{Name: row.name, Values: msValues(v)})
			}
			p50, p90, lo, hi := percentiles(v)
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", r.label, row.name, ms(p50), ms(p90), ms(lo), ms(hi), row.goal)
		}
		phasePlots = append(phasePlots, phases)
		var rss []time.Duration // bytes, sorted by the same percentile helper
		for _, s := range r.samples {
			rss = append(rss, time.Duration(s.rss))
		}
		p50, p90, lo, hi := percentiles(rss)
		fmt.Fprintf(&b, "| %s | the Ray pods' RSS once Complete | %s | %s | %s | %s |  |\n", r.label, mib(p50), mib(p90), mib(lo), mib(hi))
	}
	fmt.Fprintf(&b, "\nWarm-up run (includes waiting for the raysim image to be loaded into the runtime): ")
	for i, r := range results {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %s", r.label, ms(r.warmup))
	}
	b.WriteString(".\n\n")
	b.WriteString("How each figure is taken: \"apply\" is the moment the RayJob create request is sent; \"Complete\" and \"RayCluster ready\" are the arrival of the " +
		"first watch event showing `status.jobDeploymentStatus: Complete` on the RayJob and `status.state: ready` on its RayCluster; " +
		"\"job submitted\" is the job's `start_time` (ms) as the head's dashboard lists it (GET /api/jobs/), set when the submission reaches the head. " +
		"\"The Ray pods' RSS\" is the resident memory of every process in the RayCluster's pods (head and worker; the submitter is not counted), " +
		"summed from /proc/<pid>/status VmRSS over the processes in each container's cgroup once the RayJob is Complete (shared pages count once per process). " +
		"Percentiles are nearest-rank. The load averages below show how busy the machine was (other work included).\n\n")
	for _, r := range results {
		fmt.Fprintf(&b, "- %s: `rayctl up %s` said: `%s`; 1-minute load average %s before the runs, %s after\n",
			r.label, strings.Join(r.args, " "), strings.Join(strings.Fields(r.chosen), " "), r.load[0], r.load[1])
	}
	res.Plots = append([]plotSpec{complete}, phasePlots...)
	return writeSuite(out, res, b.String())
}

// rows is one measurement of every sample of r.
func (r rayjobResult) rows(get func(rayjobSample) time.Duration) []time.Duration {
	var v []time.Duration
	for _, s := range r.samples {
		v = append(v, get(s))
	}
	return v
}

// slug turns a configuration's label into a file name part ("containerd, raysim" → "containerd-raysim").
func slug(label string) string {
	return strings.Join(strings.FieldsFunc(strings.ToLower(label), func(r rune) bool { return r == ' ' || r == ',' }), "-")
}

// percentiles returns nearest-rank p50 and p90, min and max.
func percentiles(v []time.Duration) (p50, p90, lo, hi time.Duration) {
	return percentile(v, 0.5), percentile(v, 0.9), percentile(v, 0), percentile(v, 1)
}

// mib shows a byte count (carried in a Duration for percentiles) in MiB.
func mib(b time.Duration) string {
	if b <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20))
}

func ms(d time.Duration) string {
	if d < 10*time.Second {
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

// rayjobRuntime starts one `rayctl up` as c says and measures c.runs RayJobs on it.
func rayjobRuntime(rayctl, samples string, c rayjobConfig) (rayjobResult, error) {
	res := rayjobResult{rayjobConfig: c}
	dir, err := os.MkdirTemp("", "rayctl-bench-rayjob-")
	if err != nil {
		return res, err
	}
	defer removeInstance(rayctl, dir)
	up, err := startUp(rayctl, dir, c.args...)
	if err != nil {
		return res, err
	}
	defer up.Stop(time.Minute)
	res.chosen = runtimeLine(up)

	kube, ray, err := clients(up, 100, 200)
	if err != nil {
		return res, err
	}
	tmpl, configMaps, err := sampleRayJob(samples, c.sample)
	if err != nil {
		return res, err
	}
	if !c.real {
		tmpl.Spec.Entrypoint = "echo hello"
	}
	tmpl.Spec.ShutdownAfterJobFinishes = false
	tmpl.Spec.TTLSecondsAfterFinished = 0

	ctx := context.Background()
	const ns = "bench"
	if err := podNamespace(ctx, kube, ns); err != nil {
		return res, err
	}
	for _, cm := range configMaps {
		if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			return res, err
		}
	}
	timeout := 3 * time.Minute
	if c.real {
		timeout = 8 * time.Minute
	}
	for i := 0; i <= c.runs; i++ {
		if i == 1 {
			res.load[0] = loadAvg()
		}
		job := tmpl.DeepCopy()
		job.Name = fmt.Sprintf("bench-%d", i)
		s, err := rayjobOnce(ctx, kube, ray, ns, job, up, timeout)
		if err != nil {
			return res, fmt.Errorf("run %d: %w\nrayctl.log tail:\n%s", i, err, logTail(dir))
		}
		if i == 0 {
			res.warmup = s.complete
			fmt.Fprintf(os.Stderr, "rayjob %s warm-up: complete %v\n", c.label, s.complete.Round(time.Millisecond))
			continue
		}
		res.samples = append(res.samples, s)
		fmt.Fprintf(os.Stderr, "rayjob %s run %d: complete %v, cluster ready %v, ready→submitted %v, RSS %s\n", c.label, i,
			s.complete.Round(time.Millisecond), s.clusterReady.Round(time.Millisecond), s.submitted.Round(time.Millisecond), mib(time.Duration(s.rss)))
	}
	res.load[1] = loadAvg()
	return res, nil
}

// sampleRayJob reads the sample RayJob file of the samples dir: the RayJob, and the objects beside it
// (the real-Ray sample's ConfigMap).
func sampleRayJob(samples, file string) (*rayv1.RayJob, []*corev1.ConfigMap, error) {
	b, err := os.ReadFile(filepath.Join(samples, file))
	if err != nil {
		return nil, nil, err
	}
	docs := strings.Split(string(b), "\n---\n")
	job := &rayv1.RayJob{}
	if err := yaml.UnmarshalStrict([]byte(docs[0]), job); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", file, err)
	}
	var configMaps []*corev1.ConfigMap
	for _, d := range docs[1:] {
		cm := &corev1.ConfigMap{}
		if err := yaml.UnmarshalStrict([]byte(d), cm); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", file, err)
		}
		configMaps = append(configMaps, cm)
	}
	return job, configMaps, nil
}

// loadAvg is the machine's 1-minute load average.
func loadAvg() string { return strings.Fields(loadAverage() + " ?")[0] }

// rayjobOnce creates job, times it to Complete, then deletes it and waits for the namespace to be empty.
func rayjobOnce(ctx context.Context, kube kubernetes.Interface, ray rayclient.Interface, ns string, job *rayv1.RayJob, up *instance.Process, timeout time.Duration) (s rayjobSample, err error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	jw, err := ray.RayV1().RayJobs(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + job.Name})
	if err != nil {
		return s, err
	}
	defer jw.Stop()
	cw, err := ray.RayV1().RayClusters(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		return s, err
	}
	defer cw.Stop()

	t0 := time.Now()
	if _, err := ray.RayV1().RayJobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		return s, err
	}
	// A run that fails leaves nothing behind either: its Ray processes would load the machine under the
	// next runs, and the next run's clean-up would wait on them and fail.
	cleaned := false
	defer func() {
		select {
		case <-up.Exited():
			return
		default:
		}
		if err != nil && !cleaned {
			if cerr := removeRayJob(context.Background(), kube, ray, ns, job.Name); cerr != nil {
				err = fmt.Errorf("%w (then: %v)", err, cerr)
			}
		}
	}()
	var (
		last      *rayv1.RayJob
		readyAt   time.Time
		completed time.Time
	)
	for completed.IsZero() || readyAt.IsZero() {
		select {
		case <-ctx.Done():
			desc := "no status seen"
			if last != nil {
				desc = fmt.Sprintf("jobDeploymentStatus %q, jobStatus %q, reason %q, message %q", last.Status.JobDeploymentStatus,
					last.Status.JobStatus, last.Status.Reason, last.Status.Message)
			}
			return s, fmt.Errorf("RayJob %s not Complete within %s: %s", job.Name, timeout, desc)
		case <-up.Exited():
			return s, fmt.Errorf("rayctl up exited")
		case ev, ok := <-jw.ResultChan():
			if !ok {
				return s, fmt.Errorf("the RayJob watch ended")
			}
			j, isJob := ev.Object.(*rayv1.RayJob)
			if !isJob || ev.Type == watch.Deleted {
				continue
			}
			last = j
			switch j.Status.JobDeploymentStatus {
			case rayv1.JobDeploymentStatusComplete:
				if completed.IsZero() {
					completed = time.Now()
				}
			case rayv1.JobDeploymentStatusFailed:
				return s, fmt.Errorf("RayJob %s failed: %s: %s", job.Name, j.Status.Reason, j.Status.Message)
			}
		case ev, ok := <-cw.ResultChan():
			if !ok {
				return s, fmt.Errorf("the RayCluster watch ended")
			}
			if c, isCluster := ev.Object.(*rayv1.RayCluster); isCluster && c.Status.State == rayv1.Ready && readyAt.IsZero() {
				readyAt = time.Now()
			}
		}
	}
	s.complete = completed.Sub(t0)
	s.clusterReady = readyAt.Sub(t0)

	// The job's submission time, from the head's dashboard.
	cluster, err := ray.RayV1().RayClusters(ns).Get(ctx, last.Status.RayClusterName, metav1.GetOptions{})
	if err != nil {
		return s, err
	}
	start, end, err := jobTimes(ctx, podHTTPClient(up), "http://"+net.JoinHostPort(cluster.Status.Head.PodIP, "8265"), last.Status.JobId)
	if err != nil {
		return s, err
	}
	s.applied, s.jobStart, s.jobEnd = t0, start, end
	s.submitted = start.Sub(readyAt)
	s.finish = completed.Sub(start)
	if s.rss, s.rssByKind, err = podsRSS(ctx, kube, ns, "ray.io/cluster="+cluster.Name); err != nil {
		return s, err
	}

	// Clean up before the next run.
	cleaned = true
	return s, removeRayJob(ctx, kube, ray, ns, job.Name)
}

// removeRayJob deletes the RayJob called name (its cluster and submitter follow) and waits until ns holds
// no RayJob of that name, no RayCluster and no pod.
func removeRayJob(ctx context.Context, kube kubernetes.Interface, ray rayclient.Interface, ns, name string) error {
	bg := metav1.DeletePropagationBackground
	if err := ray.RayV1().RayJobs(ns).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	err := poll(ctx, 2*time.Minute, func() bool {
		_, jerr := ray.RayV1().RayJobs(ns).Get(ctx, name, metav1.GetOptions{})
		clusters, cerr := ray.RayV1().RayClusters(ns).List(ctx, metav1.ListOptions{})
		pods, perr := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return apierrors.IsNotFound(jerr) && cerr == nil && len(clusters.Items) == 0 && perr == nil && len(pods.Items) == 0
	})
	if err != nil {
		return fmt.Errorf("RayJob %s, its cluster and pods not gone after the run: %w", name, err)
	}
	return nil
}

// podHTTPClient reaches up's pod IPs from inside its node network namespace (the host has no route to
// them), or from the host's when up has none mounted there (pods on the host's network, rootless).
func podHTTPClient(up *instance.Process) *http.Client {
	ns := filepath.Join(filepath.Dir(up.Kubeconfig()), "network", "node.netns")
	if ok, err := mountinfo.Mounted(ns); err != nil || !ok {
		ns = ""
	}
	dial := func(ctx context.Context, nw, addr string) (net.Conn, error) { return network.DialIn(ctx, ns, nw, addr) }
	return &http.Client{Transport: &http.Transport{Proxy: nil, DialContext: dial}, Timeout: 10 * time.Second}
}

// jobTimes reads a job's start_time and end_time (zero when it lists none) from the dashboard at
// base ("http://host:port") through hc.
func jobTimes(ctx context.Context, hc *http.Client, base, submissionID string) (start, end time.Time, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/jobs/"+submissionID, nil)
	if err != nil {
		return start, end, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return start, end, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return start, end, fmt.Errorf("GET /api/jobs/%s: HTTP %d: %s", submissionID, resp.StatusCode, body)
	}
	var info struct {
		StartTime *int64 `json:"start_time"`
		EndTime   *int64 `json:"end_time"`
	}
	if err := json.Unmarshal(body, &info); err != nil || info.StartTime == nil {
		return start, end, fmt.Errorf("GET /api/jobs/%s: no start_time in %s", submissionID, body)
	}
	if info.EndTime != nil && *info.EndTime != 0 {
		end = time.UnixMilli(*info.EndTime)
	}
	return time.UnixMilli(*info.StartTime), end, nil
}

func poll(ctx context.Context, timeout time.Duration, cond func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

// startUp runs `rayctl up --data-dir dir --port 0 args...` with a pod network of its own and waits for
// its ready line.
func startUp(rayctl, dir string, args ...string) (*instance.Process, error) {
	return startUpEnv(rayctl, dir, nil, args...)
}

// startUpEnv is startUp with env ("KEY=value") added to rayctl's environment.
func startUpEnv(rayctl, dir string, env []string, args ...string) (*instance.Process, error) {
	return instance.Start(context.Background(), instance.Options{Binary: rayctl, DataDir: dir, Env: env,
		Args: instance.OwnNetwork(append([]string{"--port", "0"}, args...))})
}

// removeInstance removes what a stopped `rayctl up` left in dir: its pods' containers, network and
// volumes (`rayctl down --purge`), then dir. os.RemoveAll alone cannot: a memory-backed emptyDir
// (KubeRay's /dev/shm) is a tmpfs mounted under dir, even on the fake runtime, and would stay mounted.
func removeInstance(rayctl, dir string) {
	if out, err := exec.Command(rayctl, "down", "--purge", "--data-dir", dir).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "rayctl down --purge: %v\n%s", err, out)
	}
	os.RemoveAll(dir)
}

// runtimeLine is what `rayctl up` printed about its runtime before it was ready.
func runtimeLine(up *instance.Process) string {
	for _, l := range up.Startup {
		if strings.Contains(strings.ToLower(l), "runtime") {
			return strings.TrimSpace(l)
		}
	}
	return "(no runtime line)"
}

func logTail(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, "rayctl.log"))
	if err != nil {
		return err.Error()
	}
	if len(b) > 6000 {
		b = b[len(b)-6000:]
	}
	return string(b)
}

// podsRSS sums the resident memory of every process in the containers of the pods selector picks, in
// all and by kind of process (procKind): a process belongs to a container when its cgroup path ends in
// the container's ID, as both runtimes name a container's cgroup.
func podsRSS(ctx context.Context, kube kubernetes.Interface, ns, selector string) (int64, map[string]int64, error) {
	pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return 0, nil, err
	}
	ids := map[string]bool{}
	for _, p := range pods.Items {
		for _, cs := range p.Status.ContainerStatuses {
			if _, id, ok := strings.Cut(cs.ContainerID, "://"); ok && id != "" {
				ids[id] = true
			}
		}
	}
	pids, err := procsWhere(func(pid string) bool {
		cg, err := os.ReadFile(filepath.Join("/proc", pid, "cgroup"))
		return err == nil && inContainer(string(cg), ids)
	})
	if err != nil {
		return 0, nil, err
	}
	total, byKind := procsRSS(pids)
	return total, byKind, nil
}

// procsWhere lists the processes (their /proc names) for which keep holds.
func procsWhere(keep func(pid string) bool) ([]string, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var pids []string
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err == nil && keep(e.Name()) {
			pids = append(pids, e.Name())
		}
	}
	return pids, nil
}

// procsRSS sums the VmRSS of processes, in all and by procKind.
func procsRSS(pids []string) (int64, map[string]int64) {
	var total int64
	byKind := map[string]int64{}
	for _, pid := range pids {
		rss := vmRSS(filepath.Join("/proc", pid, "status"))
		cmd, _ := os.ReadFile(filepath.Join("/proc", pid, "cmdline"))
		total += rss
		byKind[procKind(string(cmd))] += rss
	}
	return total, byKind
}

// procKind names what a Ray process is, from its command line (NUL-separated): Ray's own process
// titles ("ray::IDLE", "ray::Counter", "ray-dashboard-JobHead-0"), its binaries (gcs_server, raylet)
// and the Python scripts of its daemons (dashboard.py, agent.py, log_monitor.py …).
func procKind(cmdline string) string {
	args := strings.FieldsFunc(cmdline, func(r rune) bool { return r == 0 })
	if len(args) == 0 {
		return "other"
	}
	first := strings.Fields(args[0])
	switch {
	case len(first) == 0:
		return "other"
	case strings.HasPrefix(first[0], "ray::"):
		return "workers (ray::…)"
	case strings.HasPrefix(first[0], "ray-dashboard-"):
		return "dashboard modules (ray-dashboard-…)"
	}
	base := filepath.Base(first[0])
	if strings.HasPrefix(base, "python") {
		for _, a := range args[1:] {
			if strings.HasSuffix(a, ".py") {
				return filepath.Base(a)
			}
			if !strings.HasPrefix(a, "-") {
				return "python " + filepath.Base(a)
			}
		}
	}
	return base
}

// inContainer reports whether a /proc/<pid>/cgroup text names a cgroup ending in one of ids.
func inContainer(cgroups string, ids map[string]bool) bool {
	for _, line := range strings.Split(cgroups, "\n") {
		if i := strings.LastIndexByte(line, '/'); i >= 0 && ids[line[i+1:]] {
			return true
		}
	}
	return false
}

// vmRSS is the VmRSS of a /proc/<pid>/status file, in bytes (0 when unreadable).
func vmRSS(status string) int64 {
	b, err := os.ReadFile(status)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
