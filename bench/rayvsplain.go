package main

// The rayvsplain suite: the same Ray cluster and job started by hand (plain Ray) and as a RayJob under
// `rayctl up`, interleaved on one machine, so that load hits both alike.
//
// The RayJob is configs/samples/rayjob-real.yaml (K8sJobMode: a submitter Job runs `ray job submit`; a
// head and one worker; its Python driver runs a task and an actor and prints a runtime-env variable) on
// `rayctl up --runtime=process --ray=host`, as suite rayjob's real-Ray leg runs it, timed from the create
// request to the watch event showing jobDeploymentStatus Complete. Plain Ray is what a user of the same
// Ray does by hand, one step after the other: `ray start --head`, `ray start --address` (both with the
// pods' CPUs and memory), then `ray job submit` of the same driver with the same runtime env, timed from
// the first exec to the submit command's exit. Both use the venv beside rayctl (_output/ray, `make ray`).
//
// Where the difference goes: for the RayJob, the chain recorder's events of the run (the kubelet's Pod
// status writes, the RayCluster's status writes, the RayJob's transitions) and the job's start and end on
// the dashboard split the time hop by hop; for plain Ray, the moments each command printed its result.
// The Ray processes' RSS is read on both once the job has ended, summed and split by kind of process.
//
// Six more sides (-rayvsplain-levers, on by default). One is plain Ray again, each `ray start` in a cgroup
// with its pod's CPU limit as a CFS quota: the cluster the pods are, by hand, beside which the sides that
// keep the pods' limits are measured too. Five measure levers. One runs the same RayJob with KubeRay v1.7's
// light-weight submitter selected as KubeRay's sample selects it (spec.submitterPodTemplate: image
// quay.io/kuberay/submitter, command /submitter, the runtime env and entrypoint as its arguments), which
// rayctl's process runtime runs as its own Go submitter (pkg/raysubmitter): what a submitter without
// Python's start-up saves. One runs it without the pods' CPU limits: what their CFS quotas cost. The last
// three run the default RayJob, the light-weight submitter's, and the no-CPU-limits RayJob with the
// light-weight submitter on a second `rayctl up` of the same flags, started with KubeRay's operator switch
// ENABLE_INIT_CONTAINER_INJECTION=false in its environment: the worker comes without the wait-gcs-ready
// init container, its `ray start --address` waiting for the GCS itself. They measure what that init
// container costs, and, the last with all three levers pulled, what is left of rayctl's own. Both instances stay up through the suite, so every side runs
// beside the other instance's idle control plane alike.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	rayclient "github.com/ray-project/kuberay/ray-operator/pkg/client/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/rayctl/rayctl/pkg/chain"
	"github.com/rayctl/rayctl/pkg/chain/chainhttp"
	"github.com/rayctl/rayctl/pkg/controllers/ray/raycluster"
	"github.com/rayctl/rayctl/pkg/instance"
)

// rvpRun is one measured run of either side.
type rvpRun struct {
	total  time.Duration
	phases []time.Duration // in the order of the side's phase names
	rss    int64
	byKind map[string]int64
	// worker (rayctl's sides): from the head's container start to the worker's Pod Running (its
	// wait-gcs-ready init container ended and its Ray container started) and to its Ready.
	worker [2]time.Duration
	// workerDown: the worker's Ray container was seen down (terminated or waiting) after its Pod was
	// Running, before the job ended: `ray start --address` gave up and the kubelet restarted it.
	workerDown bool
}

// rvpSide is one way of getting the cluster and the job run, and its measured runs.
type rvpSide struct {
	name   string
	phases []string
	spans  [][2]int // each of rvpGroups as a range of phases
	run    func(ctx context.Context, i int) (rvpRun, error)
	runs   []rvpRun
	lever  bool  // a lever's side: its failure drops it, not the suite
	err    error // why a lever's side was dropped
	// limited: the side's Ray runs under the pods' CPU limits as CFS quotas (rayctl's sides that keep the
	// sample's limits, and plain Ray's side under them).
	limited bool
}

// The phases of each side, along its critical path; each is the time from the previous one's end.
var (
	rayctlPhases = []string{
		"apply → head Pod seen by the kubelet",
		"→ head container started",
		"→ head Pod Ready (Ray's head start-up + readiness probe)",
		"→ worker Pod Ready (if later than the head: its wait-gcs-ready, start-up, probe)",
		"→ RayCluster ready (status write)",
		"→ RayJob Running (submitter Job created)",
		"→ submitter container started",
		"→ job submitted (its start_time)",
		"→ job ended (its end_time: the driver)",
		"→ submitter ended (it follows the logs to the end)",
		"→ RayJob Complete",
	}
	plainPhases = []string{
		"`ray start --head` → it printed \"Ray runtime started\"",
		"`ray start --address` → it printed \"Ray runtime started\"",
		"`ray job submit` → job submitted (its start_time)",
		"→ job ended (its end_time: the driver)",
		"→ `ray job submit` exited",
	}
	// rvpGroups are the stretches every side has: cluster up, submission, the job itself, seeing its end.
	rvpGroups   = []string{"cluster up", "submission", "the job", "its end seen"}
	rayctlSpans = [][2]int{{0, 5}, {5, 8}, {8, 9}, {9, 11}}
	plainSpans  = [][2]int{{0, 2}, {2, 3}, {3, 4}, {4, 5}}
	// noWaitPhases are rayctlPhases on the sides without the wait-gcs-ready init container.
	noWaitPhases = append(append(append([]string(nil), rayctlPhases[:3]...),
		"→ worker Pod Ready (if later than the head: its `ray start --address` waiting for the GCS, start-up, probe)"), rayctlPhases[4:]...)
	lwSubmitter  = "quay.io/kuberay/submitter:v1.5.1"
	rvpPlainName = "plain Ray"
	// rvpPlainLimitsName is plain Ray with each `ray start` under its pod's CPU limit as a CFS quota.
	rvpPlainLimitsName = "plain Ray, the pods' CPU limits"
	// The lever sides' names that writeLevers looks up.
	rvpLWName       = "rayctl, light-weight submitter"
	rvpNoLimitsName = "rayctl, no CPU limits"
	rvpNoWaitName   = "rayctl, no wait-gcs-ready"
	rvpLWNoWaitName = "rayctl, light-weight submitter, no wait-gcs-ready"
	rvpAllName      = "rayctl, all three levers"
)

// noInitContainerEnv is KubeRay's operator switch, read by rayctl's RayCluster controller from rayctl's
// environment, that leaves the workers' wait-gcs-ready init container out.
const noInitContainerEnv = "ENABLE_INIT_CONTAINER_INJECTION=false"

func runRayVsPlain(rayctl, out, samples, rayBin string, runs int, levers bool) error {
	if rayBin == "" {
		rayBin = filepath.Join(filepath.Dir(filepath.Dir(rayctl)), "ray", "bin")
	}
	if _, err := os.Stat(filepath.Join(rayBin, "ray")); err != nil {
		return fmt.Errorf("rayvsplain needs real Ray (make ray): %w", err)
	}
	tmpl, configMaps, err := sampleRayJob(samples, "rayjob-real.yaml")
	if err != nil {
		return err
	}
	tmpl.Spec.ShutdownAfterJobFinishes = false
	tmpl.Spec.TTLSecondsAfterFinished = 0
	plain, err := newPlainRay(rayBin, tmpl, configMaps)
	if err != nil {
		return err
	}
	defer os.RemoveAll(plain.dir)

	loadBefore := loadAverage()
	ctx := context.Background()
	inst, err := startRVPInstance(ctx, rayctl, nil, configMaps)
	if inst != nil {
		defer inst.close(rayctl)
	}
	if err != nil {
		return err
	}
	tmpl.Name = "bench"
	sides := []*rvpSide{
		{name: "rayctl", phases: rayctlPhases, spans: rayctlSpans, run: inst.rayjob(tmpl), limited: true},
		{name: rvpPlainName, phases: plainPhases, spans: plainSpans, run: plain.run},
	}
	if levers {
		// The same cluster started by hand under the same CPU limits as the pods': each `ray start`, and
		// the processes it starts, in a cgroup of its own with the pod's CFS quota, as the process runtime
		// runs a pod's containers (the driver, started by the head's job supervisor, under the head's).
		limited := *plain
		limited.quota = true
		side := &rvpSide{name: rvpPlainLimitsName, phases: plainPhases, spans: plainSpans, run: limited.run, lever: true, limited: true}
		if err := cgroupCPUQuotas(); err != nil {
			side.err = err
			fmt.Fprintf(os.Stderr, "rayvsplain: %s dropped: %v\n", side.name, err)
		}
		sides = append(sides, side)
		// KubeRay's way to select its light-weight submitter: the runtime env and entrypoint as /submitter's arguments.
		lw := tmpl.DeepCopy()
		lw.Name = "bench-lw"
		lw.Spec.SubmitterPodTemplate = &corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "ray-job-submitter", Image: lwSubmitter, Command: []string{"/submitter"},
				Args: append([]string{"--runtime-env-json", plain.runtimeEnv, "--"}, strings.Fields(tmpl.Spec.Entrypoint)...)}}}}
		sides = append(sides, &rvpSide{name: rvpLWName, phases: rayctlPhases, spans: rayctlSpans, run: inst.rayjob(lw), lever: true, limited: true})
		// The pods' CPU limits are CFS quotas (the process runtime applies them as a node would): a head
		// of 1 CPU runs its GCS, raylet, dashboard, agents and the driver in one CPU's time, where plain
		// Ray's processes share the machine's cores. The same RayJob without them (Ray still told 1 CPU
		// per node by rayStartParams) shows what the quota costs.
		nq := tmpl.DeepCopy()
		nq.Name = "bench-nq"
		spec := nq.Spec.RayClusterSpec
		unlimit := func(params map[string]string, pod *corev1.PodSpec) map[string]string {
			c := &pod.Containers[0]
			if params == nil {
				params = map[string]string{}
			}
			params["num-cpus"] = strconv.FormatInt(c.Resources.Limits.Cpu().Value(), 10)
			delete(c.Resources.Limits, corev1.ResourceCPU)
			return params
		}
		spec.HeadGroupSpec.RayStartParams = unlimit(spec.HeadGroupSpec.RayStartParams, &spec.HeadGroupSpec.Template.Spec)
		for i := range spec.WorkerGroupSpecs {
			g := &spec.WorkerGroupSpecs[i]
			g.RayStartParams = unlimit(g.RayStartParams, &g.Template.Spec)
		}
		sides = append(sides, &rvpSide{name: rvpNoLimitsName, phases: rayctlPhases, spans: rayctlSpans, run: inst.rayjob(nq), lever: true})
		// The three together: the least a RayJob can ask of KubeRay's shape, so what is left beside plain
		// Ray is rayctl's own: scheduling, Pod start-up, readiness probes, the submitter's Job and Pod, and
		// the controllers' status writes.
		all := nq.DeepCopy()
		all.Name = "bench-all"
		all.Spec.SubmitterPodTemplate = lw.Spec.SubmitterPodTemplate.DeepCopy()
		// KubeRay's operator switch that leaves the workers' wait-gcs-ready init container out, on a second
		// `rayctl up` of the same flags with it in its environment (the RayCluster controller reads it when it
		// starts), interleaved with the others: both instances are up all along, so each side runs beside
		// the other's idle control plane alike.
		noInit, err := startRVPInstance(ctx, rayctl, []string{noInitContainerEnv}, configMaps)
		if noInit != nil {
			defer noInit.close(rayctl)
		}
		for _, v := range []struct {
			name string
			job  *rayv1.RayJob
		}{{rvpNoWaitName, tmpl}, {rvpLWNoWaitName, lw}, {rvpAllName, all}} {
			side := &rvpSide{name: v.name, phases: noWaitPhases, spans: rayctlSpans, lever: true, limited: v.job != all}
			if err != nil {
				side.err = fmt.Errorf("the second rayctl up (%s): %w", noInitContainerEnv, err)
				fmt.Fprintf(os.Stderr, "rayvsplain: %s dropped: %v\n", side.name, side.err)
			} else {
				side.run = noInit.rayjob(v.job)
			}
			sides = append(sides, side)
		}
	}
	for i := 0; i <= runs; i++ {
		// The side that goes first rotates; run 0 of each side is a warm-up (the file cache, Python's bytecode).
		for k := range sides {
			side := sides[(i+k)%len(sides)]
			if side.err != nil {
				continue
			}
			r, err := side.run(ctx, i)
			if err != nil && side.lever {
				// A lever that fails is reported, not fatal: the comparison stands without it.
				fmt.Fprintf(os.Stderr, "rayvsplain: %s failed, dropped: %v\n", side.name, err)
				side.err = err
				continue
			}
			if err != nil {
				return fmt.Errorf("%s: %w", side.name, err)
			}
			fmt.Fprintf(os.Stderr, "rayvsplain run %d, %s: %v, RSS %s, phases %v, worker %v\n", i, side.name, r.total.Round(time.Millisecond), mib(time.Duration(r.rss)), roundAll(r.phases), roundAll(r.worker[:]))
			if i > 0 {
				side.runs = append(side.runs, r)
			}
		}
	}
	return writeRayVsPlain(out, sides, runs, loadBefore, loadAverage(), runtimeLine(inst.up))
}

// rvpInstance is one `rayctl up --runtime=process --ray=host` the suite's RayJobs run on, with its
// clients and the bench namespace holding the sample's ConfigMaps.
type rvpInstance struct {
	dir  string
	up   *instance.Process
	kube kubernetes.Interface
	ray  rayclient.Interface
	cc   *chainhttp.Client
}

// rvpNamespace is the namespace the RayJobs run in, on every instance.
const rvpNamespace = "bench"

// startRVPInstance starts `rayctl up --runtime=process --ray=host` on a data dir of its own, with env added
// to its environment, and creates the bench namespace and configMaps in it. An instance is returned
// (to close) whenever its data dir was made, even with an error.
func startRVPInstance(ctx context.Context, rayctl string, env []string, configMaps []*corev1.ConfigMap) (*rvpInstance, error) {
	dir, err := os.MkdirTemp("", "rayctl-bench-rvp-")
	if err != nil {
		return nil, err
	}
	in := &rvpInstance{dir: dir}
	if in.up, err = startUpEnv(rayctl, dir, env, "--runtime=process", "--ray=host"); err != nil {
		return in, err
	}
	if in.kube, in.ray, err = clients(in.up, 100, 200); err != nil {
		return in, err
	}
	cfg, err := in.up.RESTConfig(100, 200)
	if err != nil {
		return in, err
	}
	if in.cc, err = chainhttp.NewClient(cfg); err != nil {
		return in, err
	}
	if err := podNamespace(ctx, in.kube, rvpNamespace); err != nil {
		return in, err
	}
	for _, cm := range configMaps {
		if _, err := in.kube.CoreV1().ConfigMaps(rvpNamespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			return in, err
		}
	}
	return in, nil
}

// close stops the instance and removes what it left.
func (in *rvpInstance) close(rayctl string) {
	if in.up != nil {
		in.up.Stop(time.Minute)
	}
	removeInstance(rayctl, in.dir)
}

// rayjob is a side's run: a copy of tmpl, named for the run, from create to Complete on the instance,
// split into hops by the chain recorder's events of the run.
func (in *rvpInstance) rayjob(tmpl *rayv1.RayJob) func(ctx context.Context, i int) (rvpRun, error) {
	return func(ctx context.Context, i int) (rvpRun, error) {
		l, err := in.cc.Events(ctx, chain.Filter{Hop: "none"})
		if err != nil {
			return rvpRun{}, err
		}
		job := tmpl.DeepCopy()
		job.Name = fmt.Sprintf("%s-%d", job.Name, i)
		s, err := rayjobOnce(ctx, in.kube, in.ray, rvpNamespace, job, in.up, 8*time.Minute)
		if err != nil {
			return rvpRun{}, fmt.Errorf("RayJob %s: %w\nrayctl.log tail:\n%s", job.Name, err, logTail(in.dir))
		}
		evs, err := in.cc.Events(ctx, chain.Filter{After: l.Next - 1, Namespace: rvpNamespace})
		if err != nil {
			return rvpRun{}, err
		}
		phases, worker, down := rayjobHops(evs.Events, s, job.Name)
		return rvpRun{total: s.complete, phases: phases, rss: s.rss, byKind: s.rssByKind, worker: worker, workerDown: down}, nil
	}
}

func roundAll(v []time.Duration) []time.Duration {
	out := make([]time.Duration, len(v))
	for i, d := range v {
		out[i] = d.Round(10 * time.Millisecond)
	}
	return out
}

// rayjobHops splits one RayJob run into rayctlPhases from the chain's events of its namespace: the
// kubelet's first write showing each Pod seen, started (Running), Ready and Succeeded, the RayCluster's
// first status write with state=ready, the RayJob's transitions, and the dashboard's job times; the
// worker's course beside the head (rvpRun.worker); and whether its container went down (rvpRun.workerDown).
func rayjobHops(evs []chain.Event, s rayjobSample, job string) ([]time.Duration, [2]time.Duration, bool) {
	type podTimes struct{ seen, running, ready, succeeded time.Time }
	pods := map[string]*podTimes{}
	var clusterReady, jobRunning, jobComplete time.Time
	workerDown := false
	first := func(t *time.Time, at time.Time) {
		if t.IsZero() {
			*t = at
		}
	}
	for _, e := range evs {
		switch {
		case e.Hop == chain.KubeletWrite && e.Pod != nil:
			kind := "submitter"
			if strings.Contains(e.Object.Name, "-head-") {
				kind = "head"
			} else if strings.Contains(e.Object.Name, "-worker-") {
				kind = "worker"
			}
			p := pods[kind]
			if p == nil {
				p = &podTimes{}
				pods[kind] = p
			}
			first(&p.seen, e.Time)
			switch e.Pod.Phase {
			case string(corev1.PodRunning):
				first(&p.running, e.Time)
			case string(corev1.PodSucceeded):
				first(&p.succeeded, e.Time)
			}
			if e.Pod.IsReady() {
				first(&p.ready, e.Time)
			}
			if kind == "worker" && !p.running.IsZero() && e.Time.Before(s.jobEnd) && containerDown(e.Pod) {
				workerDown = true
			}
		case e.Hop == chain.StatusWrite && e.Object.Kind == "RayCluster":
			for _, f := range e.Status {
				if f.Name == "state" && f.Value == string(rayv1.Ready) {
					first(&clusterReady, e.Time)
				}
			}
		case e.Hop == chain.Transition && e.Object.Name == job && e.Change != nil:
			switch rayv1.JobDeploymentStatus(e.Change.To) {
			case rayv1.JobDeploymentStatusRunning:
				first(&jobRunning, e.Time)
			case rayv1.JobDeploymentStatusComplete:
				first(&jobComplete, e.Time)
			}
		}
	}
	get := func(kind string) podTimes {
		if p := pods[kind]; p != nil {
			return *p
		}
		return podTimes{}
	}
	head, worker, sub := get("head"), get("worker"), get("submitter")
	marks := []time.Time{s.applied, head.seen, head.running, head.ready, worker.ready, clusterReady, jobRunning,
		sub.running, s.jobStart, s.jobEnd, sub.succeeded, s.applied.Add(s.complete)}
	if worker.ready.Before(head.ready) {
		// The worker got Ready first: the head's Ready is then the one the cluster waited for.
		marks[4] = head.ready
	}
	w := between([]time.Time{head.running, worker.running, worker.ready})
	return between(marks), [2]time.Duration{w[0], w[0] + w[1]}, workerDown
}

// containerDown reports whether a status write shows one of the Pod's containers terminated or waiting
// (the chain lists only the containers that are not running and ready).
func containerDown(p *chain.PodStatus) bool {
	for _, c := range p.Containers {
		if c.State != chain.Running {
			return true
		}
	}
	return false
}

// between is the time from each mark to the next (zero where either is unknown).
func between(marks []time.Time) []time.Duration {
	var out []time.Duration
	for i := 1; i < len(marks); i++ {
		var d time.Duration
		if !marks[i].IsZero() && !marks[i-1].IsZero() {
			d = marks[i].Sub(marks[i-1])
		}
		out = append(out, d)
	}
	return out
}

// plainRay starts the sample's cluster and job by hand with the host's Ray.
type plainRay struct {
	bin        string   // the venv's bin dir
	dir        string   // the driver's working dir and Ray's temp dirs
	env        []string // the commands' environment
	head, work []string // `ray start` resource flags of the head and the worker, from the pods' limits
	// headCPU and workCPU are the pods' CPU limits in millicores; with quota, each `ray start` runs under
	// its pod's as a CFS quota.
	headCPU, workCPU int64
	quota            bool
	runtimeEnv       string // the RayJob's runtimeEnvYAML as JSON
	entrypoint       string
}

// newPlainRay writes the sample's ConfigMap files to a working dir, as the RayJob's pods see them at
// /home/ray/samples, and takes the CPUs and memory each `ray start` gets from the pods' limits, as the
// RayCluster controller passes them (--num-cpus, --memory).
func newPlainRay(bin string, job *rayv1.RayJob, configMaps []*corev1.ConfigMap) (*plainRay, error) {
	dir, err := os.MkdirTemp("", "rvp-")
	if err != nil {
		return nil, err
	}
	for _, cm := range configMaps {
		for k, v := range cm.Data {
			if err := os.WriteFile(filepath.Join(dir, k), []byte(v), 0o644); err != nil {
				return nil, err
			}
		}
	}
	var env map[string]any
	if err := yaml.Unmarshal([]byte(job.Spec.RuntimeEnvYAML), &env); err != nil {
		return nil, fmt.Errorf("runtimeEnvYAML: %w", err)
	}
	envJSON, err := json.Marshal(env)
	if err != nil {
		return nil, err
	}
	limits := func(c []corev1.Container) []string {
		l := c[0].Resources.Limits
		return []string{"--num-cpus=" + strconv.FormatInt(l.Cpu().Value(), 10), "--memory=" + strconv.FormatInt(l.Memory().Value(), 10)}
	}
	spec := job.Spec.RayClusterSpec
	headC, workC := spec.HeadGroupSpec.Template.Spec.Containers, spec.WorkerGroupSpecs[0].Template.Spec.Containers
	p := &plainRay{bin: bin, dir: dir, runtimeEnv: string(envJSON),
		head: limits(headC), work: limits(workC),
		headCPU: headC[0].Resources.Limits.Cpu().MilliValue(), workCPU: workC[0].Resources.Limits.Cpu().MilliValue(),
		// The sample's driver is at /home/ray/samples in the pods; here it is in dir.
		entrypoint: strings.ReplaceAll(job.Spec.Entrypoint, "/home/ray/samples/", "")}
	p.env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "PYTHONUNBUFFERED=1",
		"RAY_USAGE_STATS_ENABLED=0", "RAY_DISABLE_DOCKER_CPU_WARNING=1")
	return p, nil
}

// run starts a head, then a worker, then submits the job and waits for it, as a user would, then reads
// the Ray processes' RSS and stops them.
func (p *plainRay) run(ctx context.Context, i int) (rvpRun, error) {
	nums, err := freePorts(5)
	if err != nil {
		return rvpRun{}, err
	}
	var ports []string
	for _, n := range nums {
		ports = append(ports, strconv.Itoa(n))
	}
	gcs, dash, agentHead, agentWorker, client := ports[0], ports[1], ports[2], ports[3], ports[4]
	tmp := filepath.Join(p.dir, fmt.Sprintf("t%d", i)) // short: Ray's socket paths must stay under 108 bytes
	if p.quota {
		tmp = filepath.Join(p.dir, fmt.Sprintf("q%d", i))
	}
	t0 := time.Now()
	head, err := p.start(ctx, append([]string{"--head", "--node-ip-address=127.0.0.1", "--port=" + gcs, "--dashboard-host=127.0.0.1",
		"--dashboard-port=" + dash, "--dashboard-agent-listen-port=" + agentHead, "--ray-client-server-port=" + client, "--temp-dir=" + tmp}, p.head...), p.cpu(p.headCPU))
	if err != nil {
		return rvpRun{}, fmt.Errorf("plain Ray: ray start --head: %w", err)
	}
	defer head.stop()
	headUp := time.Now()
	worker, err := p.start(ctx, append([]string{"--address=127.0.0.1:" + gcs, "--node-ip-address=127.0.0.1",
		"--dashboard-agent-listen-port=" + agentWorker}, p.work...), p.cpu(p.workCPU))
	if err != nil {
		return rvpRun{}, fmt.Errorf("plain Ray: ray start --address: %w", err)
	}
	defer worker.stop()
	workerUp := time.Now()
	id := fmt.Sprintf("plain-%d-%d", i, time.Now().UnixNano())
	address := "http://127.0.0.1:" + dash
	submit := exec.CommandContext(ctx, filepath.Join(p.bin, "ray"), "job", "submit", "--address", address, "--submission-id", id,
		"--runtime-env-json", p.runtimeEnv, "--")
	submit.Args = append(submit.Args, strings.Fields(p.entrypoint)...)
	submit.Dir, submit.Env = p.dir, p.env
	if out, err := submit.CombinedOutput(); err != nil {
		return rvpRun{}, fmt.Errorf("plain Ray: ray job submit: %w\n%s", err, out)
	} else if !strings.Contains(string(out), "greeting: hello from the runtime env") {
		return rvpRun{}, fmt.Errorf("plain Ray: the driver did not print the runtime env's greeting:\n%s", out)
	}
	done := time.Now()
	start, end, err := jobTimes(ctx, &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 10 * time.Second}, address, id)
	if err != nil {
		return rvpRun{}, err
	}
	// The node's processes, without `ray start --block` itself: a user's `ray start` returns once the node
	// runs (a KubeRay Pod's `ray start --block` stays, and counts on rayctl's side).
	var pids []string
	for _, n := range []*rayNode{head, worker} {
		for _, pid := range descendants(n.cmd.Process.Pid) {
			if pid != strconv.Itoa(n.cmd.Process.Pid) {
				pids = append(pids, pid)
			}
		}
	}
	rss, byKind := procsRSS(pids)
	return rvpRun{total: done.Sub(t0), phases: between([]time.Time{t0, headUp, workerUp, start, end, done}), rss: rss, byKind: byKind}, nil
}

// rayNode is one `ray start --block`, in a process group of its own.
type rayNode struct {
	cmd    *exec.Cmd
	cgroup string // its cgroup's dir, or ""
	done   chan struct{}
}

// cpu is the CFS quota a node of a pod with cpuMillis of CPU limit runs under: none without p.quota.
func (p *plainRay) cpu(cpuMillis int64) int64 {
	if !p.quota {
		return 0
	}
	return cpuMillis
}

// start runs `ray start --block args...` and returns once it printed that the Ray runtime started (what
// `ray start` without --block prints as it returns); --block keeps the node's processes its children,
// so stopping it stops them all. With cpuMillis, it runs in a cgroup of its own limited to that much
// CPU (a CFS quota, as the process runtime limits a pod's containers), which its processes inherit.
func (p *plainRay) start(ctx context.Context, args []string, cpuMillis int64) (*rayNode, error) {
	cmd := exec.Command(filepath.Join(p.bin, "ray"), append([]string{"start", "--block"}, args...)...)
	var cg string
	if cpuMillis > 0 {
		var err error
		if cg, err = newCPUCgroup(cpuMillis); err != nil {
			return nil, err
		}
		// The shell joins the cgroup, then becomes `ray start`: every process Ray starts is born in it.
		cmd.Args = append([]string{"sh", "-c", `echo $$ > "$1/cgroup.procs" && shift && exec "$@"`, "sh", cg}, cmd.Args...)
		cmd.Path = "/bin/sh"
	}
	cmd.Dir, cmd.Env = p.dir, p.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		removeCgroup(cg)
		return nil, err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		removeCgroup(cg)
		return nil, err
	}
	n := &rayNode{cmd: cmd, cgroup: cg, done: make(chan struct{})}
	started := make(chan struct{})
	var text strings.Builder
	go func() {
		sc := bufio.NewScanner(out)
		said := false
		for sc.Scan() {
			if !said {
				text.WriteString(sc.Text() + "\n")
			}
			if !said && strings.Contains(sc.Text(), "Ray runtime started") {
				said = true
				close(started)
			}
		}
		_, _ = io.Copy(io.Discard, out)
		_ = cmd.Wait()
		// n.done first: a start that never said it started is seen as exited, not as started.
		close(n.done)
		if !said {
			close(started)
		}
	}()
	select {
	case <-started:
	case <-ctx.Done():
		n.stop()
		return nil, ctx.Err()
	case <-time.After(3 * time.Minute):
		n.stop()
		return nil, fmt.Errorf("no \"Ray runtime started\" within 3 minutes")
	}
	select {
	case <-n.done:
		n.stop()
		return nil, fmt.Errorf("ray start exited:\n%s", text.String())
	default:
	}
	return n, nil
}

// stop ends the node: SIGTERM to `ray start --block` (it stops the processes it started), then, after
// a while, SIGKILL to its process group and whatever of its descendants is left.
func (n *rayNode) stop() {
	left := descendants(n.cmd.Process.Pid)
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.done:
	case <-time.After(20 * time.Second):
	}
	_ = syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL)
	killAll(append(left, cgroupProcs(n.cgroup)...))
	<-n.done
	removeCgroup(n.cgroup)
}

// cpuCgroupRoot is where the cgroup v1 cpu controller is mounted (the machines of these figures have
// cgroup v1, as pkg/runtime/process uses it).
const cpuCgroupRoot = "/sys/fs/cgroup/cpu"

// cgroupCPUQuotas says why this process cannot give plain Ray's nodes CPU quotas, or nil if it can.
func cgroupCPUQuotas() error {
	dir, err := newCPUCgroup(1000)
	if err != nil {
		return fmt.Errorf("plain Ray under CPU quotas needs the cgroup v1 cpu controller, writable (root): %w", err)
	}
	removeCgroup(dir)
	return nil
}

// cpuCgroups counts the cgroups newCPUCgroup made, for their names.
var cpuCgroups int

// newCPUCgroup makes a cgroup below this process's own in the cpu hierarchy whose processes share
// cpuMillis of CPU time (a CFS quota over runc's period, as the process runtime writes a pod's).
func newCPUCgroup(cpuMillis int64) (string, error) {
	own := "/"
	if b, err := os.ReadFile("/proc/self/cgroup"); err == nil {
		for line := range strings.Lines(string(b)) {
			// hierarchy-ID:controller-list:path
			if f := strings.SplitN(strings.TrimSpace(line), ":", 3); len(f) == 3 && slices.Contains(strings.Split(f[1], ","), "cpu") {
				own = f[2]
			}
		}
	}
	cpuCgroups++
	dir := filepath.Join(cpuCgroupRoot, own, fmt.Sprintf("rayctl-bench-%d-%d", os.Getpid(), cpuCgroups))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", err
	}
	const period = 100000 // µs
	for _, f := range []struct {
		file  string
		value int64
	}{{"cpu.cfs_period_us", period}, {"cpu.cfs_quota_us", max(cpuMillis*period/1000, 1000)}} {
		if err := os.WriteFile(filepath.Join(dir, f.file), []byte(strconv.FormatInt(f.value, 10)), 0o644); err != nil {
			removeCgroup(dir)
			return "", err
		}
	}
	return dir, nil
}

// removeCgroup removes a cgroup once its processes are gone, killing whichever are still in it and
// retrying while they are being reaped.
func removeCgroup(dir string) {
	if dir == "" {
		return
	}
	for range 100 {
		if err := syscall.Rmdir(dir); err == nil || !errors.Is(err, syscall.EBUSY) {
			return
		}
		killAll(cgroupProcs(dir))
		time.Sleep(50 * time.Millisecond)
	}
	fmt.Fprintf(os.Stderr, "rayvsplain: cgroup %s still busy, left\n", dir)
}

// cgroupProcs lists the processes in the cgroup at dir (none for "" or one that is gone).
func cgroupProcs(dir string) []string {
	if dir == "" {
		return nil
	}
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	return strings.Fields(string(b))
}

// killAll sends SIGKILL to each of pids (their /proc names).
func killAll(pids []string) {
	for _, pid := range pids {
		if id, err := strconv.Atoi(pid); err == nil {
			_ = syscall.Kill(id, syscall.SIGKILL)
		}
	}
}

// descendants lists a process and every process below it (their /proc names).
func descendants(pid int) []string {
	parent := map[string]string{}
	all, _ := procsWhere(func(string) bool { return true })
	for _, p := range all {
		b, err := os.ReadFile(filepath.Join("/proc", p, "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid …: comm may hold spaces, so read after its closing parenthesis.
		if i := strings.LastIndexByte(string(b), ')'); i > 0 {
			if f := strings.Fields(string(b[i+1:])); len(f) > 1 {
				parent[p] = f[1]
			}
		}
	}
	in := map[string]bool{strconv.Itoa(pid): true}
	for changed := true; changed; {
		changed = false
		for p, pp := range parent {
			if in[pp] && !in[p] {
				in[p], changed = true, true
			}
		}
	}
	var out []string
	for p := range in {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// medianDur is the median (upper middle) of v, ignoring zeros (not seen).
func medianDur(v []time.Duration) time.Duration {
	var s []time.Duration
	for _, d := range v {
		if d > 0 {
			s = append(s, d)
		}
	}
	return medianSigned(s)
}

// phaseMedians is, for each phase, its median over runs.
func phaseMedians(runs []rvpRun, n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range n {
		var v []time.Duration
		for _, r := range runs {
			v = append(v, r.phases[i])
		}
		out[i] = medianDur(v)
	}
	return out
}

// groupMedian is the median over runs of the sum of the phases in span.
func groupMedian(runs []rvpRun, span [2]int) time.Duration {
	var v []time.Duration
	for _, r := range runs {
		var sum time.Duration
		for _, d := range r.phases[span[0]:span[1]] {
			sum += d
		}
		v = append(v, sum)
	}
	return medianDur(v)
}

func (s *rvpSide) totals() []time.Duration {
	var v []time.Duration
	for _, r := range s.runs {
		v = append(v, r.total)
	}
	return v
}

// workerDownRuns is how many of the side's runs saw the worker's Ray container down (rvpRun.workerDown).
func (s *rvpSide) workerDownRuns() int {
	n := 0
	for _, r := range s.runs {
		if r.workerDown {
			n++
		}
	}
	return n
}

// workerMedians are the medians over the side's runs of rvpRun.worker: head container started → worker
// Running (below zero when the worker's container started first, as it may without wait-gcs-ready), and
// → worker Ready.
func (s *rvpSide) workerMedians() (running, ready time.Duration) {
	var wRunning, wReady []time.Duration
	for _, r := range s.runs {
		wRunning, wReady = append(wRunning, r.worker[0]), append(wReady, r.worker[1])
	}
	return medianSigned(wRunning), medianDur(wReady)
}

// msSigned is ms of a time that may be below zero, to 10 ms (a few ms before the head is "0.00 s", not "-0.00 s").
func msSigned(d time.Duration) string { return ms(d.Round(10 * time.Millisecond)) }

// medianSigned is the median (upper middle) of v, zeros and negative values included.
func medianSigned(v []time.Duration) time.Duration {
	if len(v) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), v...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// workerAfterHead is the median over the side's runs of head Pod Ready → worker Pod Ready, counting as
// zero the runs whose worker was Ready first (phaseMedians leaves those out), and how many those were.
func (s *rvpSide) workerAfterHead() (time.Duration, int) {
	var v []time.Duration
	first := 0
	for _, r := range s.runs {
		v = append(v, r.phases[3])
		if r.phases[3] <= 0 {
			first++
		}
	}
	return medianSigned(v), first
}

func (s *rvpSide) rssMedian() time.Duration {
	var v []time.Duration
	for _, r := range s.runs {
		v = append(v, time.Duration(r.rss))
	}
	return medianDur(v)
}

func (s *rvpSide) kindMedian(k string) time.Duration {
	var v []time.Duration
	for _, r := range s.runs {
		v = append(v, time.Duration(r.byKind[k]))
	}
	sort.Slice(v, func(i, j int) bool { return v[i] < v[j] })
	return v[len(v)/2]
}

func writeRayVsPlain(out string, sides []*rvpSide, runs int, loadBefore, loadAfter, runtime string) error {
	var dropped []*rvpSide
	var kept []*rvpSide
	for _, s := range sides {
		if s.err != nil || len(s.runs) == 0 {
			dropped = append(dropped, s)
		} else {
			kept = append(kept, s)
		}
	}
	sides = kept
	rc, pr := sides[0], sides[1]
	prMed := medianDur(pr.totals())
	// pl, when it ran: plain Ray under the pods' CPU limits, beside which the sides that keep them are
	// the same cluster.
	var pl *rvpSide
	for _, s := range sides {
		if s.name == rvpPlainLimitsName {
			pl = s
		}
	}
	plain := func(s *rvpSide) bool { return s == pr || s == pl }
	var b strings.Builder
	fmt.Fprintf(&b, "# A RayJob under rayctl beside plain Ray (`make bench SUITE=rayvsplain`)\n\n")
	fmt.Fprintf(&b, "Measured %s: %d runs of each side, interleaved (the side that goes first rotates), after one warm-up run of each. "+
		"Machine: %s, shared with other work and loaded (1-minute load average %s before, %s after): read the ratios, which interleaving keeps fair, more than the seconds.\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), runs, machine(), loadBefore, loadAfter)
	fmt.Fprintf(&b, "The same cluster and job on every side: configs/samples/rayjob-real.yaml (a head and one worker, 1 CPU each, 2 GiB and 1 GiB; its driver runs a task and an actor "+
		"and prints a runtime-env variable) with the host's Ray 2.60.0 (`make ray`). **rayctl**: the RayJob created on `rayctl up --runtime=process --ray=host` (%s), "+
		"timed from the create request to the watch event showing `jobDeploymentStatus: Complete`; the cluster is kept after the job, and deleted before the next run. "+
		"Its submitter is KubeRay's default: a Job running `ray job status`, `ray job submit --no-wait` and `ray job logs --follow`, three Python start-ups. "+
		"**rayctl, light-weight submitter**: the same RayJob with KubeRay v1.7's light-weight submitter, selected as KubeRay's sample ray-job.light-weight-submitter.yaml selects it "+
		"(`spec.submitterPodTemplate` running `%s`'s `/submitter` with the runtime env and the entrypoint as its arguments); rayctl's process runtime runs it as its own Go submitter (pkg/raysubmitter). "+
		"**rayctl, no CPU limits**: the same RayJob with the pods' `limits.cpu` taken out (and `rayStartParams.num-cpus: \"1\"`, so Ray counts the same CPUs): "+
		"the process runtime applies a CPU limit as a CFS quota, as a node does, so a 1-CPU head runs its GCS, raylet, dashboard, agents and the driver in one CPU's time, where plain Ray's processes share the machine's cores. "+
		"**rayctl, no wait-gcs-ready** and **rayctl, light-weight submitter, no wait-gcs-ready**: the RayJobs of **rayctl** and of **rayctl, light-weight submitter** on a second "+
		"`rayctl up` of the same flags, started with `%s` in its environment: KubeRay's operator switch (rayctl's RayCluster controller reads it from its own environment) "+
		"that leaves out the worker's wait-gcs-ready init container (`ray health-check` against the GCS, a Python start-up under a 200m CPU limit); the worker's Ray container "+
		"then starts with its Pod and its `ray start --address` waits for the GCS itself. **rayctl, all three levers**: on that second instance, the RayJob of **rayctl, no CPU limits** "+
		"with the light-weight submitter's template. Both instances are up through the whole suite, each idle while the other runs. "+
		"**plain Ray**: `ray start --head`, then `ray start --address` (each with the pods' `--num-cpus` and `--memory`, as the RayCluster controller passes them), then "+
		"`ray job submit` of the same driver with the same `--runtime-env-json`, one after the other as a user types them, timed from the first exec to the submit command's exit. "+
		"**plain Ray, the pods' CPU limits**: the same, each `ray start` and every process it starts (on the head, the job's driver too) in a cgroup of its own with its pod's CPU limit "+
		"as a CFS quota (cgroup v1 `cpu.cfs_quota_us` over a 100 ms period, as the process runtime writes a pod's): the cluster the RayJob's pods are, started by hand, "+
		"beside which the sides that keep the pods' limits are measured too. Only the two nodes are held to the quotas: `ray job submit` runs without one (under rayctl the submitter "+
		"is a Pod of its own), and no memory limit is set (the pods' are, through cgroups; the job is far below them).\n\n", runtime, lwSubmitter, noInitContainerEnv)
	for _, s := range dropped {
		fmt.Fprintf(&b, "Side **%s** failed and was dropped: %v\n\n", s.name, s.err)
	}
	// The columns beside plain Ray under the pods' CPU limits, when that side ran.
	sameHead, sameNone := "", ""
	if pl != nil {
		sameHead, sameNone = " ÷ plain Ray under the pods' CPU limits (the sides that keep them) | goal |", "  |  |"
	}
	fmt.Fprintf(&b, "| side | nothing → job ended and seen, median | each run | ÷ plain Ray | goal |%s\n|---|---|---|---|---|%s\n", sameHead, strings.Repeat("---|", strings.Count(sameHead, "|")))
	var figs []figure
	for _, s := range sides {
		med := medianDur(s.totals())
		if s == pr {
			fmt.Fprintf(&b, "| %s | %s | %s |  |  |%s\n", s.name, ms(med), joinDur(s.totals()), sameNone)
			continue
		}
		ratio := med.Seconds() / prMed.Seconds()
		if s == pl {
			// What the quotas cost plain Ray: context, not a goal.
			fmt.Fprintf(&b, "| %s | %s | %s | %.2f× |  |%s\n", s.name, ms(med), joinDur(s.totals()), ratio, sameNone)
			figs = append(figs, figure{Name: s.name + " ÷ plain Ray, nothing → job ended, median of interleaved runs", Value: fmt.Sprintf("%s vs %s: %.2f×", ms(med), ms(prMed), ratio)})
			continue
		}
		same := sameNone
		if s.limited && pl != nil {
			plMed := medianDur(pl.totals())
			r := med.Seconds() / plMed.Seconds()
			same = fmt.Sprintf(" %.2f× | ≤ 1.0× %s |", r, mark(r <= 1))
			figs = append(figs, goalFigure(s.name+" ÷ plain Ray under the pods' CPU limits, nothing → job ended, median of interleaved runs", fmt.Sprintf("%s vs %s: %.2f×", ms(med), ms(plMed), r), "≤ 1.0×", r <= 1))
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %.2f× | ≤ 1.0× %s |%s\n", s.name, ms(med), joinDur(s.totals()), ratio, mark(ratio <= 1), same)
		figs = append(figs, goalFigure(s.name+" ÷ plain Ray, nothing → job ended, median of interleaved runs", fmt.Sprintf("%s vs %s: %.2f×", ms(med), ms(prMed), ratio), "≤ 1.0×", ratio <= 1))
	}
	rcRSS, prRSS := rc.rssMedian(), pr.rssMedian()
	rssMet := rcRSS <= prRSS
	figs = append(figs, goalFigure("the Ray processes' RSS once the job ended, rayctl ÷ plain Ray", fmt.Sprintf("%s vs %s: %.2f×", mib(rcRSS), mib(prRSS), float64(rcRSS)/float64(prRSS)), "≤ 1.0×", rssMet))
	fmt.Fprintf(&b, "\nThe Ray processes' RSS once the job ended, median: rayctl %s, plain Ray %s: %.2f× (goal ≤ 1.0× %s); by process below.\n\n", mib(rcRSS), mib(prRSS), float64(rcRSS)/float64(prRSS), mark(rssMet))

	fmt.Fprintf(&b, "## Where the time goes\n\nEvery side splits into the same four stretches (median of each stretch's sum over the runs):\n\n")
	fmt.Fprintf(&b, "| stretch |")
	for _, s := range sides {
		fmt.Fprintf(&b, " %s |", s.name)
	}
	fmt.Fprintf(&b, " rayctl − plain Ray |\n|---|%s---|\n", strings.Repeat("---|", len(sides)))
	bars := plotSpec{File: "rayvsplain-phases.png", Title: "Nothing → job ended, by stretch (median)", Kind: "bar", YLabel: "s", Categories: rvpGroups}
	vals := make([][]float64, len(sides))
	for g, name := range rvpGroups {
		fmt.Fprintf(&b, "| %s |", name)
		for k, s := range sides {
			d := groupMedian(s.runs, s.spans[g])
			vals[k] = append(vals[k], d.Seconds())
			fmt.Fprintf(&b, " %s |", ms(d))
		}
		fmt.Fprintf(&b, " %+.2f s |\n", vals[0][g]-vals[1][g])
	}
	for k, s := range sides {
		bars.Series = append(bars.Series, series{Name: s.name, Values: vals[k]})
	}
	for _, s := range sides {
		if plain(s) {
			continue
		}
		fmt.Fprintf(&b, "\n%s, hop by hop, from the chain recorder's events of the run (`rayctl trace rayjob/NAME` shows the same hops): "+
			"the kubelet's first Pod status write showing each Pod seen, started, Ready and Succeeded, the RayCluster's first status write with `state=ready`, "+
			"the RayJob's transitions, and the job's `start_time` and `end_time` on the dashboard. Each row is the time from the row above:\n\n", s.name)
		writePhaseTable(&b, s)
	}
	fmt.Fprintf(&b, "\nThe worker beside the head (rayctl's sides; from the head's container start, medians): its Ray container started "+
		"(the worker Pod Running: after its wait-gcs-ready init container ended, or, without it, at once, `ray start --address` then waiting for the GCS; below zero when it started before the head's), "+
		"then its Pod Ready; and the runs in which its Ray container was seen down (terminated or waiting) after it had started and before the job ended, "+
		"as it would be had `ray start --address` given up and the kubelet restarted it:\n\n"+
		"| side | → worker Running | → worker Ready | Ray container down | each run |\n|---|---|---|---|---|\n")
	for _, s := range sides {
		if plain(s) {
			continue
		}
		var each []string
		for _, r := range s.runs {
			each = append(each, msSigned(r.worker[0])+" / "+joinDur(r.worker[1:]))
		}
		running, ready := s.workerMedians()
		fmt.Fprintf(&b, "| %s | %s | %s | %d of %d runs | %s |\n", s.name, msSigned(running), ms(ready), s.workerDownRuns(), len(s.runs), strings.Join(each, ", "))
	}
	fmt.Fprintf(&b, "\nPlain Ray, step by step:\n\n")
	writePhaseTable(&b, pr)
	if pl != nil {
		fmt.Fprintf(&b, "\nPlain Ray under the pods' CPU limits, step by step:\n\n")
		writePhaseTable(&b, pl)
	}

	fmt.Fprintf(&b, "\n## Ray's memory\n\nThe RSS of every Ray process once the job has ended (rayctl: the processes in the RayCluster's Pods' containers, "+
		"as suite rayjob reads them, the submitter not counted; plain Ray: every process below the two `ray start --block`, not counting them: "+
		"a user's `ray start` returns once its node runs, where a KubeRay Pod's `ray start --block` stays), from /proc/PID/status VmRSS "+
		"(shared pages count once per process), by kind of process; medians:\n\n")
	fmt.Fprintf(&b, "| process | rayctl | plain Ray | rayctl − plain |\n|---|---|---|---|\n")
	kinds := map[string]bool{}
	for _, s := range []*rvpSide{rc, pr} {
		for _, r := range s.runs {
			for k := range r.byKind {
				kinds[k] = true
			}
		}
	}
	var names []string
	for k := range kinds {
		names = append(names, k)
	}
	sort.Strings(names)
	mem := plotSpec{File: "rayvsplain-memory.png", Title: "The Ray processes' RSS once the job ended, by kind (median)", Kind: "bar", YLabel: "MiB"}
	var rcMem, prMem []float64
	for _, k := range names {
		a, p := rc.kindMedian(k), pr.kindMedian(k)
		fmt.Fprintf(&b, "| %s | %s | %s | %+.0f MiB |\n", k, mibOr0(a), mibOr0(p), float64(a-p)/(1<<20))
		mem.Categories = append(mem.Categories, k)
		rcMem, prMem = append(rcMem, float64(a)/(1<<20)), append(prMem, float64(p)/(1<<20))
	}
	fmt.Fprintf(&b, "| all | %s | %s | %+.0f MiB |\n", mib(rcRSS), mib(prRSS), float64(rcRSS-prRSS)/(1<<20))
	mem.Series = []series{{Name: rc.name, Values: rcMem}, {Name: pr.name, Values: prMem}}

	writeLevers(&b, sides)

	res := suiteResult{Suite: "rayvsplain", Title: "A RayJob under rayctl beside plain Ray", Machine: machine() + "; load average " + loadBefore + " when the suite started",
		Figures: figs, Plots: []plotSpec{bars, mem}}
	return writeSuite(out, res, b.String())
}

// groupStep is the median of a side's i-th phase.
func groupStep(s *rvpSide, i int) time.Duration { return groupMedian(s.runs, [2]int{i, i + 1}) }

// ratioOr is "N.NN× that" for s beside base, or "not measured" when s did not run.
func ratioOr(s, base *rvpSide) string {
	if s == nil {
		return "not measured"
	}
	return fmt.Sprintf("%.2f×", medianDur(s.totals()).Seconds()/medianDur(base.totals()).Seconds())
}

// writePhaseTable writes a side's phases: median and each run.
func writePhaseTable(b *strings.Builder, s *rvpSide) {
	fmt.Fprintf(b, "| step | median | each run |\n|---|---|---|\n")
	med := phaseMedians(s.runs, len(s.phases))
	for i, name := range s.phases {
		var each []time.Duration
		for _, r := range s.runs {
			each = append(each, r.phases[i])
		}
		fmt.Fprintf(b, "| %s | %s | %s |\n", name, ms(med[i]), joinDur(each))
	}
}

func mibOr0(b time.Duration) string {
	if b <= 0 {
		return "–"
	}
	return mib(b)
}

func joinDur(v []time.Duration) string {
	var s []string
	for _, d := range v {
		if d <= 0 {
			s = append(s, "–")
		} else {
			s = append(s, ms(d))
		}
	}
	return strings.Join(s, ", ")
}

// writeNoWaitLever says what leaving the wait-gcs-ready init container out saved: the sides without it (nw
// with the default submitter, lwNW with the light-weight one; either may be nil, dropped) beside the same
// RayJobs with it (rc, lw), all measured against plain Ray (pr).
func writeNoWaitLever(b *strings.Builder, rc, lw, nw, lwNW, pr *rvpSide) {
	if nw == nil && lwNW == nil {
		fmt.Fprintf(b, "- **Without the wait-gcs-ready init container**: not measured in this run (its sides were dropped, above, or not run: -rayvsplain-levers=false).\n")
		return
	}
	total := func(s *rvpSide) time.Duration { return medianDur(s.totals()) }
	up := func(s *rvpSide) time.Duration { return groupMedian(s.runs, s.spans[0]) }
	worker := func(s *rvpSide) string {
		running, ready := s.workerMedians()
		after, first := s.workerAfterHead()
		return fmt.Sprintf("worker's Ray container started %s after the head's, Pod Ready %s after the head's container started and %s after the head Pod's Ready "+
			"(worker Ready first in %d of %d runs; its Ray container seen down in %d)", msSigned(running), ms(ready), ms(after), first, len(s.runs), s.workerDownRuns())
	}
	saved := func(with, without *rvpSide, label string) string {
		d := total(with) - total(without)
		return fmt.Sprintf("%s: nothing → job ended %s instead of %s, %+.2f s (%.2f× plain Ray instead of %.2f×); cluster up %s instead of %s, %+.2f s; %s, where with it the %s",
			label, ms(total(without)), ms(total(with)), -d.Seconds(), total(without).Seconds()/total(pr).Seconds(), total(with).Seconds()/total(pr).Seconds(),
			ms(up(without)), ms(up(with)), (up(without) - up(with)).Seconds(), worker(without), worker(with))
	}
	fmt.Fprintf(b, "- **Without the wait-gcs-ready init container** (`%s` in a second `rayctl up`'s environment; a measurement, rayctl's default is KubeRay's: "+
		"the init container is injected). What the switch saved, each side against the same RayJob with the init container:\n", noInitContainerEnv)
	if nw != nil {
		fmt.Fprintf(b, "  - %s.\n", saved(rc, nw, "default submitter"))
	}
	if nw == nil {
		fmt.Fprintf(b, "  - default submitter: its side without the init container was dropped (above).\n")
	}
	switch {
	case lwNW != nil && lw != nil:
		fmt.Fprintf(b, "  - %s.\n", saved(lw, lwNW, "light-weight submitter"))
	case lwNW != nil:
		fmt.Fprintf(b, "  - light-weight submitter: its side with the init container was dropped (above), so there is nothing to compare with.\n")
	default:
		fmt.Fprintf(b, "  - light-weight submitter: its side without the init container was dropped (above).\n")
	}
}

// writeAllLevers says what is left beside plain Ray with the three levers pulled at once, stretch by
// stretch: what rayctl itself adds when a RayJob asks for the least KubeRay's shape allows.
func writeAllLevers(b *strings.Builder, all, pr *rvpSide) {
	if all == nil {
		fmt.Fprintf(b, "- **The three together**: not measured in this run (its side was dropped, above, or not run).\n")
		return
	}
	total := func(s *rvpSide) time.Duration { return medianDur(s.totals()) }
	var stretches []string
	for g, name := range rvpGroups {
		a, p := groupMedian(all.runs, all.spans[g]), groupMedian(pr.runs, pr.spans[g])
		stretches = append(stretches, fmt.Sprintf("%s %s against %s (%+.2f s)", name, ms(a), ms(p), (a-p).Seconds()))
	}
	fmt.Fprintf(b, "- **The three together** (light-weight submitter, no CPU limits, no wait-gcs-ready: the least a RayJob can ask of KubeRay's shape; "+
		"what is left beside plain Ray is rayctl's own: scheduling, Pod start-up, readiness probes, the submitter's Job and Pod, the controllers' status writes): nothing → job ended %s "+
		"against plain Ray's %s, **%.2f×**; by stretch: %s.\n",
		ms(total(all)), ms(total(pr)), total(all).Seconds()/total(pr).Seconds(), strings.Join(stretches, ", "))
}

// rvpNote is a markdown file whose text ends the levers' section (-rayvsplain-note): what a run before a
// change measured, beside this one.
var rvpNote string

// writeLevers says what each lever measured here saved, from the runs.
func writeLevers(b *strings.Builder, sides []*rvpSide) {
	byName := map[string]*rvpSide{}
	for _, s := range sides {
		byName[s.name] = s
	}
	rc, pr := sides[0], sides[1]
	rcHops, prSteps := phaseMedians(rc.runs, len(rayctlPhases)), phaseMedians(pr.runs, len(plainPhases))
	total := func(s *rvpSide) time.Duration { return medianDur(s.totals()) }
	fmt.Fprintf(b, "\n## The levers, measured\n\n")
	fmt.Fprintf(b, "- **The submitter as soon as the cluster is ready, not on a poll.** The RayJob controller watches its RayCluster (it owns it) and acts on "+
		"the status write that makes it ready: RayCluster ready → RayJob Running (submitter Job created) took %s (median), "+
		"and the submitter's container started %s later. There is no poll left to remove here. Submitting before the RayCluster is ready "+
		"(as soon as the head's dashboard answers) would change the status transitions KubeRay users see (it waits for `state: ready`), so it is not done.\n",
		ms(rcHops[5]), ms(rcHops[6]))
	if lw := byName[rvpLWName]; lw != nil {
		sub := func(s *rvpSide) time.Duration { return groupMedian(s.runs, s.spans[1]) }
		end := func(s *rvpSide) time.Duration { return groupMedian(s.runs, s.spans[3]) }
		fmt.Fprintf(b, "- **A submitter without Python's start-up** (KubeRay v1.7's light-weight submitter, selected by the RayJob's submitter template; "+
			"rayctl runs it as its own Go submitter): cluster ready → job submitted %s instead of %s, the job's end seen %s after it instead of %s; "+
			"nothing → job ended %s instead of %s (%.2f× plain Ray instead of %.2f×). It is the user's choice, as under KubeRay: the default submitter "+
			"(the Pod shape KubeRay users see: the head's image running `ray job …`) is unchanged.\n",
			ms(sub(lw)), ms(sub(rc)), ms(end(lw)), ms(end(rc)), ms(total(lw)), ms(total(rc)), total(lw).Seconds()/total(pr).Seconds(), total(rc).Seconds()/total(pr).Seconds())
	}
	if nq := byName[rvpNoLimitsName]; nq != nil {
		job := func(s *rvpSide) time.Duration { return groupMedian(s.runs, s.spans[2]) }
		up := func(s *rvpSide) time.Duration { return groupMedian(s.runs, s.spans[0]) }
		fmt.Fprintf(b, "- **The pods' CPU limits** (not a lever rayctl should pull: a node enforces them, and the sample asks for 1 CPU per Ray container): "+
			"without them the cluster was up in %s instead of %s and the job ran in %s instead of %s; nothing → job ended %s instead of %s (%.2f× plain Ray). "+
			"Plain Ray's processes are not held to one CPU each.\n",
			ms(up(nq)), ms(up(rc)), ms(job(nq)), ms(job(rc)), ms(total(nq)), ms(total(rc)), total(nq).Seconds()/total(pr).Seconds())
	}
	if pl := byName[rvpPlainLimitsName]; pl != nil {
		fmt.Fprintf(b, "- **Plain Ray held to the same limits** (each `ray start` under its pod's CPU quota): `ray start --head` took %s instead of %s, "+
			"`ray start --address` %s instead of %s; nothing → job ended %s instead of %s (%.2f×). That is what the quotas cost Ray itself; "+
			"the RayJob with KubeRay's defaults took %.2f× that, the light-weight submitter's %s.\n",
			ms(groupStep(pl, 0)), ms(groupStep(pr, 0)), ms(groupStep(pl, 1)), ms(groupStep(pr, 1)), ms(total(pl)), ms(total(pr)), total(pl).Seconds()/total(pr).Seconds(),
			total(rc).Seconds()/total(pl).Seconds(), ratioOr(byName[rvpLWName], pl))
	}
	fmt.Fprintf(b, "- **The readiness probe and wait-gcs-ready intervals** are rayctl's own (first readiness check after %d s, then every %d s; "+
		"wait-gcs-ready every 1 s; KubeRay: 10 s then 5 s, and 5 s): head container started → Ready took %s beside plain Ray's `ray start --head` %s, "+
		"so the probe's wait (at most one period) is part of that difference; the rest is the head's start-up under its CPU limit and beside the worker's.\n",
		raycluster.ReadinessInitialDelay, raycluster.ReadinessPeriod, ms(rcHops[2]), ms(prSteps[0]))
	wRunning, wReady := rc.workerMedians()
	fmt.Fprintf(b, "- **Workers started beside the head**: the worker Pod is created with the head Pod, but KubeRay's wait-gcs-ready init container "+
		"holds its Ray back until `ray health-check` reaches the GCS, and that check is a Python start-up of Ray's CLI (about a second of CPU) "+
		"under the 200m CPU limit KubeRay gives the init container: the worker's Ray container started %s after the head's (median) and its Pod was "+
		"Ready %s after the head's container started, %s after the head Pod's Ready (plain Ray: `ray start --address` took %s after the head's). "+
		"KubeRay's operator switch `ENABLE_INIT_CONTAINER_INJECTION=false` (rayctl reads it from its environment) leaves the init container out, "+
		"and Ray's `ray start --address` then waits for the GCS itself: the no-wait-gcs-ready sides measure it.\n",
		ms(wRunning), ms(wReady), ms(rcHops[3]), ms(prSteps[1]))
	writeNoWaitLever(b, rc, byName[rvpLWName], byName[rvpNoWaitName], byName[rvpLWNoWaitName], pr)
	writeAllLevers(b, byName[rvpAllName], pr)
	if rvpNote != "" {
		if note, err := os.ReadFile(rvpNote); err == nil {
			fmt.Fprintf(b, "%s\n", strings.TrimSpace(string(note)))
		} else {
			fmt.Fprintf(os.Stderr, "rayvsplain: -rayvsplain-note: %v\n", err)
		}
	}
}
