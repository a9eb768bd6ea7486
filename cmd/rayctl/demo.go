package main

// rayctl demo: apply a sample RayJob, show its trigger chain live, and end with the latencies along the
// causal line from the head Pod's Ready write to the job's submission, and the job's result.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	rayclient "github.com/ray-project/kuberay/ray-operator/pkg/client/clientset/versioned"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/rayctl/rayctl/configs"
	"github.com/rayctl/rayctl/pkg/ansi"
	"github.com/rayctl/rayctl/pkg/chain"
	"github.com/rayctl/rayctl/pkg/datadir"
	"github.com/rayctl/rayctl/pkg/raysim/jobs"
)

// demoSample is the embedded RayJob `rayctl demo` applies unless --file names another.
const demoSample = "samples/rayjob-http.yaml"

type demoOptions struct {
	file    string
	cluster *clusterFlags
	keep    bool
	start   bool
	timeout time.Duration
}

func newDemoCommand(g *globalFlags) *cobra.Command {
	o := &demoOptions{}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run a sample RayJob and show its trigger chain live, then the latency of each hop and the job's result",
		Long: `Apply a sample RayJob (configs/samples/rayjob-http.yaml, under a new name) in its own namespace,
print each hop of the trigger chain as it happens — the API server accepting writes, the kubelet
writing Pod status, each controller's informer, mapping, queue, Reconcile, status writes and
dashboard calls — and, once the RayJob is Complete or Failed, a table of the latency of every hop
on the causal line from the head Pod's Ready write to the job's submission, the job's result and
the time from apply to the end. The RayJob is deleted at the end unless --keep.

It runs against the rayctl on the data dir, or the cluster --kubeconfig, $KUBECONFIG or --context
name, as kubectl would; --start starts rayctl in the background on the data dir first (and stops it
at the end). Made for a projector: 80 columns, colour only on a terminal.`,
		Example: `  rayctl up --detach && rayctl demo
  rayctl demo --start
  rayctl demo --file my-rayjob.yaml --namespace team-a --keep`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runDemo(ctx, cmd.OutOrStdout(), g.dataDir, o)
		},
	}
	cmd.Flags().StringVarP(&o.file, "file", "f", "", "a RayJob manifest to run instead of the sample")
	o.cluster = addClusterFlags(cmd, "demo")
	cmd.Flags().BoolVar(&o.keep, "keep", false, "keep the RayJob (and its cluster) at the end instead of deleting it")
	cmd.Flags().BoolVar(&o.start, "start", false, "start rayctl up --detach if rayctl is not running, and stop it at the end")
	cmd.Flags().DurationVar(&o.timeout, "timeout", 5*time.Minute, "how long to wait for the RayJob to finish")
	return cmd
}

// demoStyle colours the demo's own lines (headings, the table) on a terminal.
type demoStyle struct{ color bool }

func (s demoStyle) bold(t string) string  { return ansi.Paint(s.color, ansi.Bold, t) }
func (s demoStyle) dim(t string) string   { return ansi.Paint(s.color, ansi.Dim, t) }
func (s demoStyle) green(t string) string { return ansi.Paint(s.color, ansi.Bold+ansi.Green, t) }
func (s demoStyle) red(t string) string   { return ansi.Paint(s.color, ansi.Bold+ansi.Red, t) }

func runDemo(ctx context.Context, out io.Writer, dataDir string, o *demoOptions) (err error) {
	st := demoStyle{color: isTerminal(out)}
	dir, err := datadir.Open(dataDir)
	if err != nil {
		return err
	}

	// The control plane: the running one, or one started for the demo.
	started := false
	if _, rerr := dir.ReadState(); rerr != nil && o.cluster.ownKubeconfig() {
		if !o.start {
			return fmt.Errorf("rayctl is not running on %s: start it with `rayctl up --detach`, or run `rayctl demo --start`", dir.Path)
		}
		fmt.Fprintf(out, "starting rayctl up in the background on %s …\n", dir.Path)
		up, serr := startDetached(ctx, dir.Path, []string{"--port", "0"})
		if serr != nil {
			return fmt.Errorf("rayctl up --detach: %w", serr)
		}
		fmt.Fprintf(out, "rayctl up ready in %d ms\n\n", up.Reported.Milliseconds())
		started = true
		defer func() {
			fmt.Fprintln(out)
			if derr := down(out, dir.Path, time.Minute); derr != nil && err == nil {
				err = derr
			}
		}()
	}
	cfg, ns, err := o.cluster.connect(dir)
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ray, err := rayclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	cc, err := chain.NewClient(cfg)
	if err != nil {
		return err
	}
	// Where the recorder stands now (the filter matches nothing; the answer carries the next Seq).
	mark, err := cc.Events(ctx, chain.Filter{Hop: "none"})
	if err != nil {
		fmt.Fprintf(out, "%s the chain recorder is not available (%v); running the job without the chain\n\n", st.red("!"), err)
		cc, mark = nil, nil
	}

	job, source, err := demoJob(o.file)
	if err != nil {
		return err
	}
	job.Namespace = ns
	if err := ensureNamespace(ctx, kube, ns); err != nil {
		return err
	}

	// Watch the RayJob and the chain before the create, so nothing is missed.
	jw, err := ray.RayV1().RayJobs(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + job.Name})
	if err != nil {
		return err
	}
	defer func() { jw.Stop() }()
	incoming := make(chan chain.Event, 4096)
	var streamErr chan error
	sctx, scancel := context.WithCancel(ctx)
	defer scancel()
	if cc != nil {
		streamErr = make(chan error, 1)
		go func() {
			streamErr <- cc.Watch(sctx, chain.Filter{Namespace: ns, After: mark.Next - 1}, func(e chain.Event) error {
				select {
				case incoming <- e:
					return nil
				case <-sctx.Done():
					return sctx.Err()
				}
			})
		}()
	}

	mode := string(job.Spec.SubmissionMode)
	if mode == "" {
		mode = string(rayv1.K8sJobMode)
	}
	fmt.Fprintf(out, "%s  RayJob %s/%s\n", st.bold("rayctl demo"), ns, job.Name)
	fmt.Fprintf(out, "  manifest    %s (%s)\n", source, mode)
	if job.Spec.Entrypoint != "" {
		fmt.Fprintf(out, "  entrypoint  %s\n", clip(job.Spec.Entrypoint, 66))
	}
	fmt.Fprintln(out)
	if cc != nil {
		fmt.Fprintln(out, st.bold("The trigger chain, live")+st.dim(" (offset from the apply; latency since the hop before)"))
		fmt.Fprintln(out, st.dim(fmt.Sprintf("%10s %9s  %-11s %s", "offset", "latency", "component", "what happened")))
	}

	// Clean up however the demo ends (Ctrl-C included), on a context of its own.
	defer func() {
		if o.keep {
			fmt.Fprintf(out, "\nkept RayJob %s/%s (delete it with `rayctl kubectl delete rayjob %s -n %s`)\n", ns, job.Name, job.Name, ns)
			return
		}
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		bg := metav1.DeletePropagationBackground
		derr := ray.RayV1().RayJobs(ns).Delete(cctx, job.Name, metav1.DeleteOptions{PropagationPolicy: &bg})
		switch {
		case apierrors.IsNotFound(derr):
		case derr != nil:
			fmt.Fprintf(out, "\ndeleting RayJob %s/%s: %v\n", ns, job.Name, derr)
		default:
			fmt.Fprintf(out, "\ndeleted RayJob %s/%s (its RayCluster and pods follow)\n", ns, job.Name)
			if started {
				// Let the pods go the normal way before the control plane stops.
				waitPodsGone(cctx, kube, ns, job.Name)
			}
		}
	}()

	stream := newDemoStream(out, chain.RenderOptions{Color: st.color}, job.Name)
	applied := time.Now()
	if _, err := ray.RayV1().RayJobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating RayJob %s/%s: %w", ns, job.Name, err)
	}

	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(o.timeout)
	defer deadline.Stop()
	var (
		final    *rayv1.RayJob
		last     *rayv1.RayJob
		finished time.Time
	)
	for final == nil {
		select {
		case e := <-incoming:
			stream.add(e, time.Now())
		case <-tick.C:
			stream.flush(time.Now(), false)
		case ev, ok := <-jw.ResultChan():
			if !ok {
				if ctx.Err() != nil {
					stream.flush(time.Now(), true)
					return fmt.Errorf("interrupted")
				}
				rv := ""
				if last != nil {
					rv = last.ResourceVersion
				}
				if jw, err = ray.RayV1().RayJobs(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + job.Name, ResourceVersion: rv}); err != nil {
					return fmt.Errorf("watching RayJob %s/%s: %w", ns, job.Name, err)
				}
				continue
			}
			if ev.Type == watch.Deleted {
				return fmt.Errorf("RayJob %s/%s was deleted before it finished", ns, job.Name)
			}
			if j, isJob := ev.Object.(*rayv1.RayJob); isJob {
				last = j
				if rayv1.IsJobDeploymentTerminal(j.Status.JobDeploymentStatus) {
					final, finished = j, time.Now()
				}
			}
		case serr := <-streamErr:
			streamErr = nil
			if serr != nil && ctx.Err() == nil {
				fmt.Fprintf(out, "%s the chain stream ended: %v\n", st.red("!"), serr)
			}
		case <-deadline.C:
			stream.flush(time.Now(), true)
			return fmt.Errorf("RayJob %s/%s did not finish within %s (last: %s)", ns, job.Name, o.timeout, jobSummary(last))
		case <-ctx.Done():
			stream.flush(time.Now(), true)
			return fmt.Errorf("interrupted")
		}
	}

	// The last hops (the final status write and transition) arrive just after the watch shows them.
	settle := time.After(500 * time.Millisecond)
drain:
	for {
		select {
		case e := <-incoming:
			stream.add(e, time.Now())
		case <-settle:
			break drain
		case <-ctx.Done():
			break drain
		}
	}
	stream.flush(time.Now(), true)
	scancel()

	if cc != nil {
		events := stream.events
		// The stream may have lost events to a slow reader; the recorder's list has them all.
		if l, lerr := cc.Events(ctx, chain.Filter{Namespace: ns, After: mark.Next - 1}); lerr == nil {
			events = events[:0:0]
			for _, e := range l.Events {
				if stream.owns(&e) {
					events = append(events, e)
				}
			}
		}
		fmt.Fprintln(out)
		printHopTable(out, st, events, ns, job.Name)
	}
	printResult(ctx, out, st, final, finished.Sub(applied))
	return nil
}

// demoJob reads the RayJob to run (the embedded sample, or file) and gives it a name of its own.
func demoJob(file string) (*rayv1.RayJob, string, error) {
	var data []byte
	var err error
	source := "configs/" + demoSample
	if file == "" {
		data, err = configs.Samples.ReadFile(demoSample)
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

// demoMS prints a latency for the demo's columns.
func demoMS(d time.Duration) string {
	if d >= 10*time.Second {
		return fmt.Sprintf("%.1f s", d.Seconds())
	}
	return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
}

// demoStream prints the demo's hops as they come: the events of the objects the demo's RayJob owns
// (its name is the prefix of all of theirs), each once what decides whether it is worth a line has
// arrived, with noise left out — predicates that passed or dropped, handlers that mapped an event
// nowhere (and the informer events that led only there), RequeueAfter enqueues, and the periodic
// Reconcile passes a RequeueAfter started that changed nothing.
type demoStream struct {
	out     io.Writer
	ropts   chain.RenderOptions
	prefix  string
	events  []chain.Event
	arrived map[uint64]time.Time
	// printed and hidden hold the steps decided so far.
	printed map[uint64]bool
	hidden  map[uint64]bool
	t0      int64
}

// demoHold is how long a hop waits for the hops that decide whether it is shown (the handler's
// mapping after an informer event), and demoPassHold how long a Reconcile pass waits for its end.
const (
	demoHold     = 150 * time.Millisecond
	demoPassHold = 5 * time.Second
)

func newDemoStream(out io.Writer, ropts chain.RenderOptions, prefix string) *demoStream {
	return &demoStream{out: out, ropts: ropts, prefix: prefix, arrived: map[uint64]time.Time{},
		printed: map[uint64]bool{}, hidden: map[uint64]bool{}, t0: -1}
}

// owns reports whether e is about one of the demo's objects.
func (s *demoStream) owns(e *chain.Event) bool {
	for _, r := range []*chain.Ref{&e.Object, e.From, e.To} {
		if r != nil && strings.HasPrefix(r.Name, s.prefix) {
			return true
		}
	}
	return false
}

func (s *demoStream) add(e chain.Event, now time.Time) {
	if !s.owns(&e) {
		return
	}
	s.events = append(s.events, e)
	s.arrived[e.Seq] = now
}

type mapKey struct {
	component, kind, name, rv string
}

// flush prints the steps that can be decided now; final decides every one.
func (s *demoStream) flush(now time.Time, final bool) {
	if len(s.events) == 0 {
		return
	}
	steps := chain.Timeline(s.events)
	bySeq := make(map[uint64]*chain.Step, len(steps))
	passes := map[uint64][]*chain.Step{}
	mapped := map[mapKey]bool{}
	for i := range steps {
		st := &steps[i]
		bySeq[st.Seq] = st
		if st.Reconcile != 0 {
			passes[st.Reconcile] = append(passes[st.Reconcile], st)
		}
		if st.Hop == chain.MapHop {
			mapped[mapKey{st.Component, st.Object.Kind, st.Object.Name, st.Object.ResourceVersion}] = true
		}
	}
	settled := func(st *chain.Step, hold time.Duration) bool {
		return final || now.Sub(s.arrived[st.Seq]) >= hold
	}
	// decide says whether a step is shown; ok is false while that is not known yet.
	decide := func(st *chain.Step) (show, ok bool) {
		switch st.Hop {
		case chain.PredicateHop, chain.MapMiss:
			return false, true
		case chain.EnqueueHop:
			// The mapping says where an event goes; an enqueue is worth a line when it is more than that.
			switch st.Outcome { // a chainhooks.EnqueueKind
			case "coalesced", "rate-limited", "delayed":
				return true, settled(st, demoHold)
			}
			return false, true
		case chain.InformerEvent:
			if mapped[mapKey{st.Component, st.Object.Kind, st.Object.Name, st.Object.ResourceVersion}] {
				return true, settled(st, demoHold)
			}
			return false, settled(st, demoHold)
		}
		if st.Reconcile == 0 {
			return true, settled(st, demoHold)
		}
		// A Reconcile pass is decided as a whole, once it has ended.
		var dequeue *chain.Step
		ended, busy := false, false
		for _, p := range passes[st.Reconcile] {
			switch p.Hop {
			case chain.DequeueHop:
				dequeue = p
			case chain.ReconcileEnd:
				ended = true
				busy = busy || p.Outcome == "error"
			case chain.StatusWrite, chain.Transition, chain.DashboardCall:
				busy = true
			}
		}
		if !ended && !settled(st, demoPassHold) {
			return false, false
		}
		timer := dequeue == nil || dequeue.Cause == 0
		if dequeue != nil {
			if c := bySeq[dequeue.Cause]; c != nil && c.Hop == chain.EnqueueHop && c.From == nil {
				timer = true
			}
		}
		if ended && !busy {
			// A pass that changed nothing: one line (its end) when an event started it, none when
			// its own RequeueAfter did.
			return !timer && st.Hop == chain.ReconcileEnd, true
		}
		return st.Hop != chain.DequeueHop, settled(st, demoHold)
	}
	for i := range steps {
		st := &steps[i]
		if s.printed[st.Seq] || s.hidden[st.Seq] {
			continue
		}
		show, ok := decide(st)
		if !ok {
			// Lines go out in time order: a hop waits for the ones before it.
			break
		}
		if !show {
			s.hidden[st.Seq] = true
			continue
		}
		s.printed[st.Seq] = true
		if s.t0 < 0 {
			s.t0 = st.At
		}
		// The latency runs from the nearest hop before it that was shown.
		latency := ""
		for c, n := bySeq[st.Cause], 0; c != nil && n < 64; c, n = bySeq[c.Cause], n+1 {
			if s.printed[c.Seq] {
				latency = demoMS(time.Duration(max(st.At-c.At, 0)))
				break
			}
		}
		if latency == "" && st.Hop == chain.APIWrite && st.Duration > 0 {
			latency = demoMS(st.Duration)
		}
		e := tidy(st.Event)
		chain.RenderLine(s.out, time.Duration(max(st.At-s.t0, 0)), latency, &e, s.ropts)
	}
}

// tidy shortens what makes a line long without saying more on a projector: an optimistic-concurrency
// conflict's full message, other long errors, and a RequeueAfter's nanoseconds.
func tidy(e chain.Event) chain.Event {
	if strings.Contains(e.Error, "the object has been modified") {
		e.Error = "Conflict: the object has been modified"
	} else {
		e.Error = clip(e.Error, 80)
	}
	if e.Hop == chain.ReconcileEnd && e.Outcome == "requeue-after" {
		if d, err := time.ParseDuration(e.Detail); err == nil {
			e.Detail = d.Round(time.Millisecond).String()
			if d >= time.Second {
				e.Detail = d.Round(time.Second / 10).String()
			}
		}
	}
	return e
}

// hopRow is one line of the latency table.
type hopRow struct {
	label, component string
	latency, total   time.Duration
	root             bool
}

// printHopTable prints the latency of each hop on the causal line that ends at the job's submission
// (its POST to the dashboard; without one, its move to Running), merging the hops that take no time
// of their own (a handler's mapping into its enqueue, the dequeue into the Reconcile's start).
func printHopTable(out io.Writer, st demoStyle, events []chain.Event, ns, name string) {
	anchor := uint64(0)
	what := "job submitted"
	for i := range events {
		e := &events[i]
		if e.Object.Kind != "RayJob" || e.Object.Namespace != ns || e.Object.Name != name {
			continue
		}
		if e.Hop == chain.DashboardCall && strings.HasPrefix(e.Detail, "POST ") && e.Error == "" && e.Code < 300 {
			anchor = e.Seq
			break
		}
	}
	if anchor == 0 {
		what = "RayJob Running"
		for i := range events {
			e := &events[i]
			if e.Hop == chain.Transition && e.Outcome == string(rayv1.JobDeploymentStatusRunning) && e.Object.Name == name {
				anchor = e.Seq
				break
			}
		}
	}
	if anchor == 0 {
		fmt.Fprintln(out, "no submission of the job was recorded, so there is no chain to time")
		return
	}
	path := chain.Path(chain.TraceFrom(events, anchor), anchor)
	rows := hopRows(path)
	if len(rows) == 0 {
		return
	}
	from := "the first hop"
	if path[0].Hop == chain.KubeletWrite {
		from = "head Pod Ready"
		if !strings.Contains(path[0].Detail, "Ready=True") {
			from = "Pod status write"
		}
	}
	fmt.Fprintf(out, "%s\n", st.bold(fmt.Sprintf("Hop latencies, %s → %s", from, what)))
	fmt.Fprintln(out, st.dim(fmt.Sprintf("  %-41s %-11s %9s %9s", "hop", "component", "latency", "total")))
	var slowest *hopRow
	for i := range rows {
		r := &rows[i]
		lat, tot := "–", "–"
		if !r.root {
			lat, tot = demoMS(r.latency), demoMS(r.total)
			if slowest == nil || r.latency > slowest.latency {
				slowest = r
			}
		}
		fmt.Fprintf(out, "  %-41s %-11s %9s %9s\n", clip(r.label, 41), r.component, lat, tot)
	}
	total := rows[len(rows)-1].total
	fmt.Fprintf(out, "  %s\n", strings.Repeat("─", 73))
	fmt.Fprintf(out, "  %s → %s: %s over %d hops\n", from, what, st.bold(demoMS(total)), len(rows)-1)
	if slowest != nil && total > 0 {
		fmt.Fprintf(out, "  slowest: %s (%s, %.0f%%)\n", clip(slowest.label, 40), demoMS(slowest.latency), 100*float64(slowest.latency)/float64(total))
	}
}

// hopRows turns a causal path into table rows.
func hopRows(path []chain.Step) []hopRow {
	var rows []hopRow
	if len(path) == 0 {
		return nil
	}
	root := path[0]
	prevAt := root.At
	rows = append(rows, hopRow{label: rootLabel(&root), component: root.Component, root: true})
	add := func(label, component string, at int64) {
		rows = append(rows, hopRow{label: label, component: component, latency: time.Duration(max(at-prevAt, 0)), total: time.Duration(max(at-root.At, 0))})
		prevAt = max(at, prevAt)
	}
	for i := 1; i < len(path); i++ {
		s, prev := &path[i], &path[i-1]
		switch s.Hop {
		case chain.MapHop, chain.DequeueHop:
			// Folded into the enqueue and the Reconcile start that follow.
			if i+1 < len(path) {
				continue
			}
			add(string(s.Hop), s.Component, s.At)
		case chain.APIWrite:
			switch prev.Hop {
			case chain.KubeletWrite:
				add("kubelet → API accepted ("+s.Object.Kind+" status)", s.Component, s.At)
			case chain.StatusWrite:
				add("status write → API accepted ("+s.Object.Kind+")", s.Component, s.At)
			default:
				add("API accepted "+s.Outcome+" "+s.Object.Kind, s.Component, s.At)
			}
		case chain.InformerEvent:
			add(fmt.Sprintf("API → %s informer (%s %s)", s.Component, s.Object.Kind, s.Outcome), s.Component, s.At)
		case chain.EnqueueHop:
			if s.From == nil {
				add("requeued "+s.Object.Kind+" ("+s.Outcome+")", s.Component, s.At)
			} else {
				add("informer → enqueue ("+s.Object.Kind+")", s.Component, s.At)
			}
		case chain.ReconcileStart:
			add("queue wait → Reconcile "+s.Object.Kind, s.Component, s.At)
		case chain.StatusWrite:
			add("Reconcile → status write ("+statusValue(s.Detail)+")", s.Component, s.At)
		case chain.Transition:
			add("Reconcile → "+s.Object.Kind+" "+s.Outcome, s.Component, s.At)
		case chain.DashboardCall:
			method, p, _ := strings.Cut(s.Detail, " ")
			if u, err := urlPath(p); err == nil {
				p = u
			}
			sent := s.At - int64(s.Duration)
			add("Reconcile → "+method+" "+p+" sent", s.Component, sent)
			add(fmt.Sprintf("%s latency (%d)", method, s.Code), s.Component, s.At)
		case chain.ReconcileEnd:
			add("Reconcile "+s.Object.Kind+" ended ("+s.Outcome+")", s.Component, s.At)
		default:
			add(string(s.Hop)+" "+s.Object.Kind, s.Component, s.At)
		}
	}
	return rows
}

// rootLabel names the hop a path starts at.
func rootLabel(s *chain.Step) string {
	switch s.Hop {
	case chain.KubeletWrite:
		ready := "Ready=False"
		if strings.Contains(s.Detail, "Ready=True") {
			ready = "Ready=True"
		}
		return "kubelet wrote " + s.Object.Kind + " status (" + ready + ")"
	case chain.APIWrite:
		return "API accepted " + s.Outcome + " " + s.Object.Kind
	}
	return chain.Describe(&s.Event)
}

// statusValue shortens a status summary ("state=ready readyWorkers=1/1",
// "jobDeploymentStatus=Running jobStatus=") to its first value.
func statusValue(summary string) string {
	f := strings.Fields(summary)
	if len(f) == 0 {
		return "status"
	}
	if _, v, ok := strings.Cut(f[0], "="); ok && v != "" {
		return v
	}
	return f[0]
}

// urlPath is the path of a dashboard URL ("http://10.0.0.2:8265/api/jobs/" → "/api/jobs/").
func urlPath(u string) (string, error) {
	rest, ok := strings.CutPrefix(u, "http://")
	if !ok {
		rest, ok = strings.CutPrefix(u, "https://")
	}
	if !ok {
		return "", errors.New("not a URL")
	}
	if i := strings.Index(rest, "/"); i >= 0 {
		return rest[i:], nil
	}
	return "/", nil
}

// printResult prints the job's outcome, its logs where the head's dashboard answers, and the time
// from apply to the end.
func printResult(ctx context.Context, out io.Writer, st demoStyle, j *rayv1.RayJob, took time.Duration) {
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
	if logs := jobLogs(ctx, j); len(logs) > 0 {
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

// jobLogs reads the last lines of the job's logs from the head's dashboard, straight on the head Pod's
// IP (which this machine reaches over the pod bridge); nil when it does not answer quickly.
func jobLogs(ctx context.Context, j *rayv1.RayJob) []string {
	ip := j.Status.RayClusterStatus.Head.PodIP
	if ip == "" || j.Status.JobId == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	c := jobs.NewClient("http://" + net.JoinHostPort(ip, "8265"))
	c.HTTP = &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 3 * time.Second}
	text, err := c.Logs(ctx, j.Status.JobId)
	if err != nil {
		return nil
	}
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
