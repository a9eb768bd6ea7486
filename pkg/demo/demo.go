// Package demo is `rayctl demo`: it applies a sample RayJob, shows its trigger chain live (read through
// a chain.Source and printed by chain/render), and ends with the latencies along the causal line from the
// head Pod's Ready write to the job's submission, and the job's result. cmd/rayctl turns flags into a
// Config; starting and stopping a control plane for the demo is the caller's, injected as a Starter.
package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	rayclient "github.com/ray-project/kuberay/ray-operator/pkg/client/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/rayctl/rayctl/configs"
	"github.com/rayctl/rayctl/pkg/ansi"
	"github.com/rayctl/rayctl/pkg/chain"
	"github.com/rayctl/rayctl/pkg/chain/chainhttp"
	"github.com/rayctl/rayctl/pkg/chain/render"
	"github.com/rayctl/rayctl/pkg/controllers/ctrlset"
	"github.com/rayctl/rayctl/pkg/controllers/ray/raycluster"
)

// Sample is the embedded RayJob the demo applies unless Config.File names another.
const Sample = "samples/rayjob-http.yaml"

// Config is what one run of the demo needs.
type Config struct {
	// File is a RayJob manifest to run instead of the sample ("" for the sample).
	File string
	// Keep leaves the RayJob (and its cluster) at the end instead of deleting it.
	Keep bool
	// Timeout is how long to wait for the RayJob to finish.
	Timeout time.Duration
	// Color paints headings, the table and the hops (for a terminal).
	Color bool
	// Start, when set, starts a control plane for the demo first and stops it at the end.
	Start *Starter
	// Connect returns the client configuration of the cluster to run on and the namespace to run in;
	// it is called after Start.
	Connect func() (*rest.Config, string, error)
	// Source reads the chain recorder (nil: chainhttp's client on the Connect configuration).
	Source func(*rest.Config) (chain.Source, error)
}

// Starter starts and stops the control plane the demo runs on (`rayctl up --detach` and `rayctl down`).
type Starter struct {
	// Where names it in what the demo prints (the data dir).
	Where string
	// Start starts it and returns how long it took to be ready, as it reported.
	Start func(ctx context.Context) (time.Duration, error)
	// Stop stops it, reporting on out.
	Stop func(out io.Writer) error
}

// demoStyle colours the demo's own lines (headings, the table) on a terminal.
type demoStyle struct{ color bool }

func (s demoStyle) bold(t string) string  { return ansi.Paint(s.color, ansi.Bold, t) }
func (s demoStyle) dim(t string) string   { return ansi.Paint(s.color, ansi.Dim, t) }
func (s demoStyle) green(t string) string { return ansi.Paint(s.color, ansi.Bold+ansi.Green, t) }
func (s demoStyle) red(t string) string   { return ansi.Paint(s.color, ansi.Bold+ansi.Red, t) }

// Run runs the demo, printing to out.
func Run(ctx context.Context, out io.Writer, o Config) (err error) {
	r := &run{out: out, o: o, st: demoStyle{color: o.Color}}

	// The control plane: the running one, or one started for the demo.
	if o.Start != nil {
		if err := r.startInstance(ctx); err != nil {
			return err
		}
		defer func() {
			if derr := r.stopInstance(); derr != nil && err == nil {
				err = derr
			}
		}()
	}
	if err := r.connect(ctx); err != nil {
		return err
	}
	if err := r.prepareJob(ctx); err != nil {
		return err
	}

	// Watch the RayJob and the chain before the create, so nothing is missed.
	if err := r.watchJob(ctx); err != nil {
		return err
	}
	defer func() { r.jw.Stop() }()
	sctx, scancel := context.WithCancel(ctx)
	defer scancel()
	r.streamChain(sctx)

	r.printHeader()
	// Clean up however the demo ends (Ctrl-C included), on a context of its own.
	defer r.cleanUp()

	stream := newDemoStream(out, render.Options{Color: r.st.color}, r.job.Name)
	applied := time.Now()
	if _, err := r.ray.RayV1().RayJobs(r.ns).Create(ctx, r.job, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating RayJob %s/%s: %w", r.ns, r.job.Name, err)
	}
	final, finished, err := r.follow(ctx, stream)
	if err != nil {
		return err
	}
	r.settle(ctx, stream)
	scancel()

	r.printHops(ctx, stream)
	printResult(ctx, out, r.st, r.kube, r.reader, final, finished.Sub(applied))
	return nil
}

// run is one run of the demo: its configuration, its clients and what it has learnt so far, shared by
// Run's steps.
type run struct {
	out io.Writer
	o   Config
	st  demoStyle
	// started is whether the demo started the control plane (and so stops it at the end).
	started bool

	kube kubernetes.Interface
	ray  rayclient.Interface
	// reader reads the RayJob's cluster and its token (its Secret, or a service account's, see raycluster.UserToken).
	reader client.Client
	// cc reads the chain recorder; nil when it is not available. mark is where it stood at the start.
	cc   chain.Source
	mark *chain.EventList

	ns     string
	job    *rayv1.RayJob
	source string

	// jw watches the RayJob; incoming and streamErr carry the chain's events live (nil without cc).
	jw        watch.Interface
	incoming  <-chan chain.Event
	streamErr <-chan error
}

// startInstance starts the control plane for the demo (o.Start).
func (r *run) startInstance(ctx context.Context) error {
	fmt.Fprintf(r.out, "starting rayctl up in the background on %s …\n", r.o.Start.Where)
	took, err := r.o.Start.Start(ctx)
	if err != nil {
		return fmt.Errorf("rayctl up --detach: %w", err)
	}
	fmt.Fprintf(r.out, "rayctl up ready in %d ms\n\n", took.Milliseconds())
	r.started = true
	return nil
}

// stopInstance stops the control plane startInstance started.
func (r *run) stopInstance() error {
	fmt.Fprintln(r.out)
	return r.o.Start.Stop(r.out)
}

// connect makes the clients of the cluster and the chain recorder, and marks where the recorder stands
// now; without a recorder the demo goes on without the chain.
func (r *run) connect(ctx context.Context) error {
	cfg, ns, err := r.o.Connect()
	if err != nil {
		return err
	}
	r.ns = ns
	if r.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return err
	}
	if r.ray, err = rayclient.NewForConfig(cfg); err != nil {
		return err
	}
	if r.reader, err = client.New(cfg, client.Options{Scheme: ctrlset.Scheme()}); err != nil {
		return err
	}
	newSource := r.o.Source
	if newSource == nil {
		newSource = func(cfg *rest.Config) (chain.Source, error) { return chainhttp.NewClient(cfg) }
	}
	if r.cc, err = newSource(cfg); err != nil {
		return err
	}
	// Where the recorder stands now (the filter matches nothing; the answer carries the next Seq).
	if r.mark, err = r.cc.Events(ctx, chain.Filter{Hop: "none"}); err != nil {
		fmt.Fprintf(r.out, "%s the chain recorder is not available (%v); running the job without the chain\n\n", r.st.red("!"), err)
		r.cc, r.mark = nil, nil
	}
	return nil
}

// prepareJob reads the RayJob to apply and makes sure its namespace exists.
func (r *run) prepareJob(ctx context.Context) error {
	job, source, err := demoJob(r.o.File)
	if err != nil {
		return err
	}
	job.Namespace = r.ns
	r.job, r.source = job, source
	return ensureNamespace(ctx, r.kube, r.ns)
}

// watchJob starts watching the RayJob (by name, before it exists).
func (r *run) watchJob(ctx context.Context) error {
	return r.rewatchJob(ctx, "")
}

// rewatchJob (re)starts the watch on the RayJob from resource version rv ("" for now).
func (r *run) rewatchJob(ctx context.Context, rv string) error {
	jw, err := r.ray.RayV1().RayJobs(r.ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + r.job.Name, ResourceVersion: rv})
	if err != nil {
		return err
	}
	r.jw = jw
	return nil
}

// streamChain follows the chain of the namespace from the mark on, until ctx ends (nothing without cc).
func (r *run) streamChain(ctx context.Context) {
	if r.cc != nil {
		r.incoming, r.streamErr = chain.Stream(ctx, r.cc, chain.Filter{Namespace: r.ns, After: r.mark.Next - 1}, 4096)
	}
}

// printHeader prints the RayJob's name, manifest and entrypoint, and the live table's heading.
func (r *run) printHeader() {
	out, st, job := r.out, r.st, r.job
	mode := string(job.Spec.SubmissionMode)
	if mode == "" {
		mode = string(rayv1.K8sJobMode)
	}
	fmt.Fprintf(out, "%s  RayJob %s/%s\n", st.bold("rayctl demo"), r.ns, job.Name)
	fmt.Fprintf(out, "  manifest    %s (%s)\n", r.source, mode)
	if job.Spec.Entrypoint != "" {
		fmt.Fprintf(out, "  entrypoint  %s\n", clip(job.Spec.Entrypoint, 66))
	}
	fmt.Fprintln(out)
	if r.cc != nil {
		fmt.Fprintln(out, st.bold("The trigger chain, live")+st.dim(" (offset from the apply; latency since the hop before)"))
		fmt.Fprintln(out, st.dim(fmt.Sprintf("%10s %9s  %-11s %s", "offset", "latency", "component", "what happened")))
	}
}

// cleanUp deletes the RayJob (unless o.Keep), on a context of its own, and when the demo started the
// control plane waits for the pods to go before it stops.
func (r *run) cleanUp() {
	out, ns, name := r.out, r.ns, r.job.Name
	if r.o.Keep {
		fmt.Fprintf(out, "\nkept RayJob %s/%s (delete it with `rayctl kubectl delete rayjob %s -n %s`)\n", ns, name, name, ns)
		return
	}
	cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	bg := metav1.DeletePropagationBackground
	derr := r.ray.RayV1().RayJobs(ns).Delete(cctx, name, metav1.DeleteOptions{PropagationPolicy: &bg})
	switch {
	case apierrors.IsNotFound(derr):
	case derr != nil:
		fmt.Fprintf(out, "\ndeleting RayJob %s/%s: %v\n", ns, name, derr)
	default:
		fmt.Fprintf(out, "\ndeleted RayJob %s/%s (its RayCluster and pods follow)\n", ns, name)
		if r.started {
			// Let the pods go the normal way before the control plane stops.
			waitPodsGone(cctx, r.kube, ns, name)
		}
	}
}

// follow prints the chain live until the RayJob's deployment is terminal, and returns the RayJob then
// and when it was seen; it fails on a timeout, an interrupt or the RayJob's deletion.
func (r *run) follow(ctx context.Context, stream *demoStream) (final *rayv1.RayJob, finished time.Time, err error) {
	ns, name := r.ns, r.job.Name
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(r.o.Timeout)
	defer deadline.Stop()
	var last *rayv1.RayJob
	for final == nil {
		select {
		case e := <-r.incoming:
			stream.add(e, time.Now())
		case <-tick.C:
			stream.flush(time.Now(), false)
		case ev, ok := <-r.jw.ResultChan():
			if !ok {
				if ctx.Err() != nil {
					stream.flush(time.Now(), true)
					return nil, time.Time{}, fmt.Errorf("interrupted")
				}
				rv := ""
				if last != nil {
					rv = last.ResourceVersion
				}
				if err := r.rewatchJob(ctx, rv); err != nil {
					return nil, time.Time{}, fmt.Errorf("watching RayJob %s/%s: %w", ns, name, err)
				}
				continue
			}
			if ev.Type == watch.Deleted {
				return nil, time.Time{}, fmt.Errorf("RayJob %s/%s was deleted before it finished", ns, name)
			}
			if j, isJob := ev.Object.(*rayv1.RayJob); isJob {
				last = j
				if rayv1.IsJobDeploymentTerminal(j.Status.JobDeploymentStatus) {
					final, finished = j, time.Now()
				}
			}
		case serr := <-r.streamErr:
			r.streamErr = nil
			if serr != nil && ctx.Err() == nil {
				fmt.Fprintf(r.out, "%s the chain stream ended: %v\n", r.st.red("!"), serr)
			}
		case <-deadline.C:
			stream.flush(time.Now(), true)
			return nil, time.Time{}, fmt.Errorf("RayJob %s/%s did not finish within %s (last: %s)", ns, name, r.o.Timeout, jobSummary(last))
		case <-ctx.Done():
			stream.flush(time.Now(), true)
			return nil, time.Time{}, fmt.Errorf("interrupted")
		}
	}
	return final, finished, nil
}

// settle takes the last hops (the final status write and transition), which arrive just after the
// watch shows them, for half a second, and flushes the stream.
func (r *run) settle(ctx context.Context, stream *demoStream) {
	settle := time.After(500 * time.Millisecond)
drain:
	for {
		select {
		case e := <-r.incoming:
			stream.add(e, time.Now())
		case <-settle:
			break drain
		case <-ctx.Done():
			break drain
		}
	}
	stream.flush(time.Now(), true)
}

// printHops prints the hop table of the RayJob's events (nothing without the chain recorder).
func (r *run) printHops(ctx context.Context, stream *demoStream) {
	if r.cc == nil {
		return
	}
	events := stream.events
	// The stream may have lost events to a slow reader; the recorder's list has them all.
	if l, lerr := r.cc.Events(ctx, chain.Filter{Namespace: r.ns, After: r.mark.Next - 1}); lerr == nil {
		events = events[:0:0]
		for _, e := range l.Events {
			if stream.owns(&e) {
				events = append(events, e)
			}
		}
	}
	fmt.Fprintln(r.out)
	printHopTable(r.out, r.st, events, r.ns, r.job.Name)
}

// demoJob reads the RayJob to run (the embedded sample, or file) and gives it a name of its own.
func demoJob(file string) (*rayv1.RayJob, string, error) {
	var data []byte
	var err error
	source := "configs/" + Sample
	if file == "" {
		data, err = configs.Samples.ReadFile(Sample)
	} else {
		source = file
		data, err = os.ReadFile(file)
	}
	if err != nil {
		return nil, "", err
	}
	var job *rayv1.RayJob
	for _, doc := range splitYAML(data) {
		var meta metav1.TypeMeta
		if yaml.Unmarshal(doc, &meta) != nil || meta.Kind != "RayJob" {
			continue
		}
		job = &rayv1.RayJob{}
		if err := yaml.Unmarshal(doc, job); err != nil {
			return nil, "", fmt.Errorf("%s: %w", source, err)
		}
		break
	}
	if job == nil {
		return nil, "", fmt.Errorf("%s holds no RayJob", source)
	}
	if job.APIVersion != "" && job.APIVersion != rayv1.GroupVersion.String() {
		return nil, "", fmt.Errorf("%s: the RayJob is %s; rayctl serves %s", source, job.APIVersion, rayv1.GroupVersion)
	}
	base := job.Name
	if base == "" {
		base = "demo"
	}
	// A unique name per run; short enough for the names KubeRay derives from it.
	if len(base) > 30 {
		base = strings.TrimRight(base[:30], "-.")
	}
	job.ObjectMeta = metav1.ObjectMeta{Name: base + "-" + utilrand.String(5), Labels: job.Labels, Annotations: job.Annotations}
	job.Status = rayv1.RayJobStatus{}
	return job, filepath.ToSlash(source), nil
}

// splitYAML cuts a multi-document YAML file into its documents.
func splitYAML(data []byte) [][]byte {
	var docs [][]byte
	for _, d := range bytes.Split(append([]byte("\n"), data...), []byte("\n---")) {
		if len(bytes.TrimSpace(d)) > 0 {
			docs = append(docs, d)
		}
	}
	return docs
}

// ensureNamespace creates ns if it is missing and waits for its default service account (pods need it).
func ensureNamespace(ctx context.Context, kube kubernetes.Interface, ns string) error {
	_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", ns, err)
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		_, err := kube.CoreV1().ServiceAccounts(ns).Get(wctx, "default", metav1.GetOptions{})
		if err == nil {
			return nil
		}
		select {
		case <-wctx.Done():
			return fmt.Errorf("namespace %s has no default service account after 1m: %v", ns, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitPodsGone waits until no pod in ns has a name starting with prefix.
func waitPodsGone(ctx context.Context, kube kubernetes.Interface, ns, prefix string) {
	for ctx.Err() == nil {
		list, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err == nil {
			left := 0
			for _, p := range list.Items {
				if strings.HasPrefix(p.Name, prefix) {
					left++
				}
			}
			if left == 0 {
				return
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func jobSummary(j *rayv1.RayJob) string {
	if j == nil {
		return "no status yet"
	}
	s := fmt.Sprintf("jobDeploymentStatus %q, jobStatus %q", j.Status.JobDeploymentStatus, j.Status.JobStatus)
	if j.Status.Message != "" {
		s += ", " + j.Status.Message
	}
	return s
}

// clip shortens s to n runes, marking the cut.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// printResult prints the job's outcome, its logs where the head's dashboard answers, and the time
// from apply to the end.
func printResult(ctx context.Context, out io.Writer, st demoStyle, kube kubernetes.Interface, reader client.Client, j *rayv1.RayJob, took time.Duration) {
	fmt.Fprintln(out)
	fmt.Fprintln(out, st.bold("Result"))
	status := string(j.Status.JobStatus)
	if status == "" {
		status = "(none)"
	}
	if j.Status.JobStatus == rayv1.JobStatusSucceeded {
		status = st.green(status)
	} else {
		status = st.red(status)
	}
	fmt.Fprintf(out, "  RayJob      %s/%s: %s, jobStatus %s\n", j.Namespace, j.Name, j.Status.JobDeploymentStatus, status)
	if msg := strings.TrimSpace(j.Status.Message); msg != "" {
		fmt.Fprintf(out, "  message     %s\n", clip(msg, 66))
	}
	if j.Status.Reason != "" {
		fmt.Fprintf(out, "  reason      %s\n", j.Status.Reason)
	}
	if logs := jobLogs(ctx, kube, reader, j); len(logs) > 0 {
		for i, l := range logs {
			label := "logs"
			if i > 0 {
				label = ""
			}
			fmt.Fprintf(out, "  %-11s %s\n", label, clip(l, 66))
		}
	}
	fmt.Fprintf(out, "  total       apply → %s in %s\n", j.Status.JobDeploymentStatus, st.bold(fmt.Sprintf("%.2f s", took.Seconds())))
}

// jobLogs reads the last lines of the job's logs from the head's dashboard, through the API server's
// proxy to the head Pod (this machine has no route to pods, as on a cluster); nil when it does not answer
// quickly. Where the cluster's Ray requires a token (read through reader) it goes as X-Ray-Authorization:
// the API server keeps a request's Authorization header to itself.
func jobLogs(ctx context.Context, kube kubernetes.Interface, reader client.Client, j *rayv1.RayJob) []string {
	head := j.Status.RayClusterStatus.Head.PodName
	if head == "" || j.Status.JobId == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	var logs struct {
		Logs string `json:"logs"`
	}
	req := kube.CoreV1().RESTClient().Get().Namespace(j.Namespace).Resource("pods").Name(head+":8265").
		SubResource("proxy").Suffix("api", "jobs", j.Status.JobId, "logs")
	var c rayv1.RayCluster
	if err := reader.Get(ctx, types.NamespacedName{Namespace: j.Namespace, Name: j.Status.RayClusterName}, &c); err == nil {
		if token, err := raycluster.UserToken(ctx, reader, &c, ""); err == nil && token != "" {
			req.SetHeader("X-Ray-Authorization", "Bearer "+token)
		}
	}
	body, err := req.DoRaw(ctx)
	if err != nil || json.Unmarshal(body, &logs) != nil {
		return nil
	}
	text := logs.Logs
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		if l = strings.TrimRight(l, "\r "); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	return lines
}
