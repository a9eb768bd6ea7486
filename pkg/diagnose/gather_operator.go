package diagnose

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"

	"github.com/rayctl/rayctl/pkg/chain"
	"github.com/rayctl/rayctl/pkg/rayparams"
)

// OperatorOptions is what the caller says of a Ray operator outside rayctl (diagnose's flags); each
// left empty is looked for.
type OperatorOptions struct {
	// User is the identity it acts as (a user, or system:serviceaccount:NS:NAME).
	User string
	// WatchNamespaces is its --watch-namespace ("" unknown; "*" all namespaces).
	WatchNamespaces string
	// MetricsURL is where its controller-runtime metrics are served (http://host:8080/metrics).
	MetricsURL string
}

// kubeRayAgent is the start of the User-Agent KubeRay's operator sends ("kuberay-operator/v1.6.2").
const kubeRayAgent = "kuberay-operator/"

// leaseName is the leader-election Lease KubeRay's operator holds.
const leaseName = "ray-operator-leader"

// needsOperator reports whether a kind of the object asked about has no rayctl controller.
func needsOperator(in *Input) bool {
	d := newDiag(in)
	for i := range d.subs {
		for _, k := range d.watcherKinds(&d.subs[i]) {
			if d.controller(k) == nil {
				return true
			}
		}
	}
	return false
}

// gatherOperator looks for the operator outside rayctl: the flags, a Deployment running KubeRay's
// image, its Lease, the API server's record of its reads, and its metrics.
func gatherOperator(ctx context.Context, c Clients, in *Input) *Operator {
	o := c.Operator
	op := &Operator{}
	if o.User != "" {
		op.User, op.UserSource, op.Found = o.User, "--operator-user", true
	}
	if o.WatchNamespaces != "" {
		op.WatchSource, op.Found = "--operator-watch-namespace", true
		if o.WatchNamespaces != "*" {
			op.WatchNamespaces = strings.Split(o.WatchNamespaces, ",")
		}
	}
	dep := findDeployment(ctx, c.Kube, op)
	lease(ctx, c.Kube, op, in.Now)
	reads(in.Events, op)
	if op.User != "" && strings.HasPrefix(op.User, "system:serviceaccount:") {
		parts := strings.Split(op.User, ":")
		op.Groups = []string{"system:serviceaccounts", "system:serviceaccounts:" + parts[2], "system:authenticated"}
	}
	switch {
	case o.MetricsURL != "":
		op.MetricsSource = o.MetricsURL
		op.Queues, op.MetricsError = metricsFromURL(ctx, o.MetricsURL)
	case dep != nil:
		if pod := operatorPod(ctx, c.Kube, dep); pod != nil {
			port := metricsPort(dep)
			op.MetricsSource = fmt.Sprintf("pods/%s:%s/proxy/metrics in %s (through the API server)", pod.Name, port, pod.Namespace)
			raw, err := c.Kube.CoreV1().Pods(pod.Namespace).ProxyGet("http", pod.Name, port, "metrics", nil).DoRaw(ctx)
			if err != nil {
				op.MetricsError = err.Error()
			} else {
				op.Queues, op.MetricsError = parseMetrics(strings.NewReader(string(raw)))
			}
		}
	}
	return op
}

// findDeployment finds a Deployment running KubeRay's operator and reads its args and service
// account (best effort: a listing that is refused finds none).
func findDeployment(ctx context.Context, kube kubernetes.Interface, op *Operator) *appsv1.Deployment {
	list, err := kube.AppsV1().Deployments("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil
	}
	for i := range list.Items {
		dep := &list.Items[i]
		ctr := operatorContainer(dep)
		if ctr == nil {
			continue
		}
		where := fmt.Sprintf("Deployment %s/%s", dep.Namespace, dep.Name)
		op.Found = true
		op.Sources = append(op.Sources, fmt.Sprintf("%s runs KubeRay's operator (image %s)", where, ctr.Image))
		running := dep.Status.AvailableReplicas > 0
		op.Running = &running
		op.RunningEvidence = append(op.RunningEvidence, fmt.Sprintf("%s has %d of %d replicas available", where, dep.Status.AvailableReplicas, deref(dep.Spec.Replicas)))
		if op.User == "" {
			sa := dep.Spec.Template.Spec.ServiceAccountName
			if sa == "" {
				sa = "default"
			}
			op.User, op.UserSource = "system:serviceaccount:"+dep.Namespace+":"+sa, where+"'s service account"
		}
		if op.WatchSource == "" {
			op.WatchSource = where + "'s args"
			if v := argValue(ctr, "watch-namespace"); v != "" {
				op.WatchNamespaces = strings.Split(v, ",")
			}
		}
		return dep
	}
	return nil
}

// operatorContainer is the Deployment's container that runs KubeRay's operator, nil if none.
func operatorContainer(dep *appsv1.Deployment) *corev1.Container {
	for i := range dep.Spec.Template.Spec.Containers {
		c := &dep.Spec.Template.Spec.Containers[i]
		if strings.Contains(c.Image, "kuberay/operator") || strings.Contains(c.Image, "kuberay-operator") ||
			slices.ContainsFunc(c.Command, func(s string) bool { return strings.Contains(s, "ray-operator") }) {
			return c
		}
	}
	return nil
}

// argValue is the value of the container's --name=value or --name value ("" if absent).
func argValue(c *corev1.Container, name string) string {
	args := append(append([]string(nil), c.Command...), c.Args...)
	for i, a := range args {
		a = strings.TrimLeft(a, "-")
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
		if a == name && i+1 < len(args) && strings.HasPrefix(args[i], "-") {
			return args[i+1]
		}
	}
	return ""
}

// metricsPort is the port of the operator's --metrics-addr (8080 by default).
func metricsPort(dep *appsv1.Deployment) string {
	if c := operatorContainer(dep); c != nil {
		if v := argValue(c, "metrics-addr"); v != "" {
			if _, port, ok := strings.Cut(v, ":"); ok {
				return port
			}
		}
	}
	return "8080"
}

// operatorPod is a running Pod of the Deployment, nil if none.
func operatorPod(ctx context.Context, kube kubernetes.Interface, dep *appsv1.Deployment) *corev1.Pod {
	sel, err := metav1.LabelSelectorAsSelector(dep.Spec.Selector)
	if err != nil {
		return nil
	}
	pods, err := kube.CoreV1().Pods(dep.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil
	}
	for i := range pods.Items {
		if pods.Items[i].Status.Phase == corev1.PodRunning {
			return &pods.Items[i]
		}
	}
	return nil
}

// lease reads KubeRay's leader-election Lease: renewed within its duration, its holder runs.
func lease(ctx context.Context, kube kubernetes.Interface, op *Operator, now time.Time) {
	list, err := kube.CoordinationV1().Leases("").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", leaseName).String()})
	if err != nil || len(list.Items) == 0 {
		return
	}
	// The most recently renewed, should several operators have run.
	l := &list.Items[0]
	for i := range list.Items {
		if r := list.Items[i].Spec.RenewTime; r != nil && (l.Spec.RenewTime == nil || r.After(l.Spec.RenewTime.Time)) {
			l = &list.Items[i]
		}
	}
	op.Found = true
	holder := ""
	if l.Spec.HolderIdentity != nil {
		holder = *l.Spec.HolderIdentity
	}
	where := fmt.Sprintf("Lease %s/%s", l.Namespace, l.Name)
	op.Sources = append(op.Sources, fmt.Sprintf("%s: KubeRay's leader election (holder %q)", where, holder))
	if l.Spec.RenewTime == nil {
		return
	}
	dur := 15 * time.Second
	if l.Spec.LeaseDurationSeconds != nil {
		dur = time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	}
	ago := now.Sub(l.Spec.RenewTime.Time)
	fresh := ago <= dur && holder != ""
	op.RunningEvidence = append(op.RunningEvidence, fmt.Sprintf("%s was last renewed %s ago (lease duration %s)", where, ago.Round(time.Second), dur))
	if op.Running == nil || (*op.Running && !fresh) {
		op.Running = &fresh
	}
}

// reads finds the operator in the API server's records: the lists and watches made with KubeRay's
// user agent name its identity and, the latest burst of them, its watch namespaces.
func reads(events []chain.Event, op *Operator) {
	var mine []chain.Event
	for _, e := range events {
		if e.Hop == chain.APIRead && e.Call != nil && strings.HasPrefix(e.Call.UserAgent, kubeRayAgent) && e.Call.Code < 300 {
			mine = append(mine, e)
		}
	}
	if len(mine) == 0 {
		return
	}
	op.Found = true
	last := mine[len(mine)-1]
	op.Sources = append(op.Sources, fmt.Sprintf("the API server saw %d lists and watches by %s (%s); the last at %s", len(mine), last.Call.User, last.Call.UserAgent, last.Time.Format("15:04:05")))
	if op.User == "" {
		op.User, op.UserSource = last.Call.User, "the API server's record of its requests (user agent "+last.Call.UserAgent+")"
	}
	// The latest start of its informers: the reads of RayJobs within a few seconds of the last one.
	var jobs []chain.Event
	for _, e := range mine {
		if e.Object.Kind == KindRayJob || e.Object.Kind == KindRayCluster {
			jobs = append(jobs, e)
		}
	}
	if len(jobs) > 0 && op.WatchSource == "" {
		end := jobs[len(jobs)-1].Time
		var nss []string
		all := false
		for _, e := range jobs {
			if end.Sub(e.Time) > 10*time.Second {
				continue
			}
			op.Reads = append(op.Reads, e)
			if e.Object.Namespace == "" {
				all = true
			} else if !slices.Contains(nss, e.Object.Namespace) {
				nss = append(nss, e.Object.Namespace)
			}
		}
		op.WatchSource = fmt.Sprintf("the namespaces of its latest lists and watches of RayJobs and RayClusters, seen by the API server at %s", end.Format("15:04:05"))
		if !all {
			slices.Sort(nss)
			op.WatchNamespaces = nss
		}
	}
}

// metricsFromURL reads an operator's metrics from url.
func metricsFromURL(ctx context.Context, url string) ([]OperatorQueue, string) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err.Error()
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err.Error()
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, "HTTP " + resp.Status
	}
	return parseMetrics(resp.Body)
}

// parseMetrics reads controller-runtime's metrics of each controller from Prometheus' text format.
func parseMetrics(r io.Reader) ([]OperatorQueue, string) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return nil, "parsing the metrics: " + err.Error()
	}
	byName := map[string]*OperatorQueue{}
	var order []string
	get := func(name string) *OperatorQueue {
		q := byName[name]
		if q == nil {
			q = &OperatorQueue{Controller: name}
			byName[name] = q
			order = append(order, name)
		}
		return q
	}
	each := func(family string, label string, fn func(q *OperatorQueue, m *dto.Metric)) {
		f := families[family]
		if f == nil {
			return
		}
		for _, m := range f.Metric {
			for _, l := range m.Label {
				if l.GetName() == label {
					fn(get(l.GetValue()), m)
				}
			}
		}
	}
	val := func(m *dto.Metric) float64 {
		switch {
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Counter != nil:
			return m.Counter.GetValue()
		}
		return 0
	}
	each("workqueue_depth", "name", func(q *OperatorQueue, m *dto.Metric) { q.Depth += val(m) })
	each("workqueue_retries_total", "name", func(q *OperatorQueue, m *dto.Metric) { q.Retries += val(m) })
	each("controller_runtime_reconcile_errors_total", "controller", func(q *OperatorQueue, m *dto.Metric) { q.Errors += val(m) })
	each("controller_runtime_reconcile_total", "controller", func(q *OperatorQueue, m *dto.Metric) { q.Reconciles += val(m) })
	each("controller_runtime_active_workers", "controller", func(q *OperatorQueue, m *dto.Metric) { q.Busy += val(m) })
	each("controller_runtime_max_concurrent_reconciles", "controller", func(q *OperatorQueue, m *dto.Metric) { q.Workers += val(m) })
	each("controller_runtime_reconcile_time_seconds", "controller", func(q *OperatorQueue, m *dto.Metric) {
		if h := m.Histogram; h != nil && h.GetSampleCount() > 0 {
			q.ReconcileSeconds = h.GetSampleSum() / float64(h.GetSampleCount())
		}
	})
	out := make([]OperatorQueue, 0, len(order))
	slices.Sort(order)
	for _, n := range order {
		out = append(out, *byName[n])
	}
	if len(out) == 0 {
		return nil, "no controller-runtime metrics in the answer"
	}
	return out, ""
}

// objectEvents lists the Kubernetes Events about the subjects (best effort).
func objectEvents(ctx context.Context, kube kubernetes.Interface, in *Input) []corev1.Event {
	var out []corev1.Event
	for _, s := range newDiag(in).subs {
		sel := fields.Set{"involvedObject.kind": s.Kind, "involvedObject.name": s.Name}.AsSelector().String()
		list, err := kube.CoreV1().Events(s.Namespace).List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			continue
		}
		out = append(out, list.Items...)
	}
	slices.SortStableFunc(out, func(a, b corev1.Event) int { return eventTime(a).Compare(eventTime(b)) })
	return out[max(0, len(out)-30):]
}

func eventTime(e corev1.Event) time.Time {
	if !e.LastTimestamp.IsZero() {
		return e.LastTimestamp.Time
	}
	if !e.EventTime.IsZero() {
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

// askRay reads, through the API server's service proxy to the head's dashboard, the Ray job of a
// running RayJob (one that initializes has not submitted it yet), or the Serve applications of a
// RayService.
func askRay(ctx context.Context, kube kubernetes.Interface, in *Input) *RayState {
	cl := in.Cluster
	if cl == nil || cl.Status.Head.ServiceName == "" {
		return nil
	}
	svc := cl.Status.Head.ServiceName
	var path string
	switch {
	case in.Job != nil && in.Job.Status.JobId != "" && in.Job.Status.JobDeploymentStatus == rayv1.JobDeploymentStatusRunning:
		path = "api/jobs/" + in.Job.Status.JobId
	case in.Service != nil:
		path = "api/serve/applications/"
	default:
		return nil
	}
	r := &RayState{Source: fmt.Sprintf("services/%s:dashboard/proxy/%s in %s", svc, path, cl.Namespace)}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	raw, err := kube.CoreV1().Services(cl.Namespace).ProxyGet("http", svc, rayparams.DashboardPortName, path, nil).DoRaw(ctx)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	if in.Service != nil {
		var serve struct {
			Applications map[string]RayApp `json:"applications"`
		}
		if err := json.Unmarshal(raw, &serve); err != nil {
			r.Error = "the answer does not parse: " + err.Error()
		}
		r.Applications = serve.Applications
		return r
	}
	var job struct {
		Status  string `json:"status"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal(raw, &job); err != nil {
		r.Error = "the answer does not parse: " + err.Error()
	}
	r.JobStatus, r.JobMessage = job.Status, job.Message
	if job.Status == "PENDING" && in.Pod != nil && in.Pod.Status.PodIP != "" {
		r.RuntimeEnvLog, r.RuntimeEnvLine = runtimeEnvSetup(ctx, kube, cl.Namespace, svc, in.Pod.Status.PodIP)
	}
	return r
}

// runtimeEnvSetup reads the head's runtime env setup logs through the dashboard's log API and returns
// the newest line of note of the first that has one: an error, a retry, or the command it runs
// ("Run cmd[3] ['…/pip', 'install', …]"). Best effort: "" when the logs cannot be read.
func runtimeEnvSetup(ctx context.Context, kube kubernetes.Interface, ns, svc, nodeIP string) (file, line string) {
	proxy := kube.CoreV1().Services(ns)
	raw, err := proxy.ProxyGet("http", svc, rayparams.DashboardPortName, "api/v0/logs", map[string]string{"node_ip": nodeIP, "glob": "runtime_env_setup-*"}).DoRaw(ctx)
	if err != nil {
		return "", ""
	}
	var files []string
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			if strings.HasPrefix(x, "runtime_env_setup-") && !slices.Contains(files, x) {
				files = append(files, x)
			}
		case []any:
			for _, y := range x {
				walk(y)
			}
		case map[string]any:
			for _, y := range x {
				walk(y)
			}
		}
	}
	var listing any
	if json.Unmarshal(raw, &listing) != nil {
		return "", ""
	}
	walk(listing)
	slices.Sort(files)
	for _, f := range files[:min(len(files), 3)] {
		text, err := proxy.ProxyGet("http", svc, rayparams.DashboardPortName, "api/v0/logs/file", map[string]string{"node_ip": nodeIP, "filename": f, "lines": "40"}).DoRaw(ctx)
		if err != nil {
			continue
		}
		if l := noteworthy(string(text)); l != "" {
			return f, l
		}
	}
	return "", ""
}

// noteworthy is what a setup log says of the setup, newest first: a line that says it fails (an error, a
// retry), else the command it runs — a pip install ahead of any other ("runs pip install … -r
// …/requirements.txt (23:59:12)"), cut to 300 characters.
func noteworthy(text string) string {
	lines := strings.Split(strings.TrimSpace(text), "\n")
	var install, other string
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		low := strings.ToLower(l)
		for _, k := range []string{"error", "retrying", "failed", "could not"} {
			if strings.Contains(low, k) {
				return cut(l, 300)
			}
		}
		if cmd, at, ok := runCmd(l); ok {
			switch {
			case install == "" && (strings.HasPrefix(cmd, "pip install") || strings.Contains(cmd, " install ")):
				install = "runs " + cmd + " (" + at + ")"
			case other == "":
				other = "runs " + cmd + " (" + at + ")"
			}
		}
	}
	if install != "" {
		return cut(install, 300)
	}
	return cut(other, 300)
}

// runCmd reads Ray's "<date> <time>,<ms> INFO utils.py:76 -- Run cmd[2] ['…/python', '-m', 'pip', …]"
// line: the command from pip on (or whole), long paths cut to their last element, and its time.
func runCmd(l string) (cmd, at string, ok bool) {
	i := strings.Index(l, "Run cmd[")
	open, end := strings.Index(l, "['"), strings.LastIndex(l, "']")
	if i < 0 || open < i || end < open {
		return "", "", false
	}
	if f := strings.Fields(l); len(f) > 1 {
		at, _, _ = strings.Cut(f[1], ",")
	}
	argv := strings.Split(l[open+2:end], "', '")
	for j, a := range argv {
		if a == "pip" || strings.HasSuffix(a, "/pip") {
			argv = argv[j:]
			argv[0] = "pip"
			break
		}
	}
	for j, a := range argv {
		if strings.Count(a, "/") > 2 {
			argv[j] = "…/" + a[strings.LastIndex(a, "/")+1:]
		}
	}
	return strings.Join(argv, " "), at, true
}

// cut is s cut to n bytes, marked with … when cut.
func cut(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
