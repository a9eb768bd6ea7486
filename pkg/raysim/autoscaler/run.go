package autoscaler

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"strconv"
	"strings"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rayctl/rayctl/pkg/rayparams"
	"github.com/rayctl/rayctl/pkg/raysim/gcs"
	rayres "github.com/rayctl/rayctl/pkg/raysim/resource"
)

// DefaultIdleTimeout is how long a worker stays idle before it goes when autoscalerOptions sets no
// idleTimeoutSeconds (Ray's default, 60 s).
const DefaultIdleTimeout = 60 * time.Second

// DefaultPeriod is the time between passes (Ray's AUTOSCALER_UPDATE_INTERVAL_S, 5 s).
const DefaultPeriod = 5 * time.Second

// Config configures the autoscaler loop.
type Config struct {
	// Cluster and Namespace name the RayCluster.
	Cluster, Namespace string
	// REST is the API server's client configuration (normally rest.InClusterConfig()).
	REST *rest.Config
	// GCS is the head's GCS client.
	GCS *gcs.Client
	// Period is the time between passes; 0 means DefaultPeriod.
	Period time.Duration
	// Logf receives a line per decision.
	Logf func(format string, args ...any)
}

// Autoscaler runs passes against one RayCluster.
type Autoscaler struct {
	cfg       Config
	kube      client.Client
	idleSince map[string]time.Time
	last      string
}

// New returns an Autoscaler for cfg.
func New(cfg Config) (*Autoscaler, error) {
	if cfg.Period <= 0 {
		cfg.Period = DefaultPeriod
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := rayv1.AddToScheme(s); err != nil {
		return nil, err
	}
	kube, err := client.New(cfg.REST, client.Options{Scheme: s})
	if err != nil {
		return nil, err
	}
	return &Autoscaler{cfg: cfg, kube: kube, idleSince: map[string]time.Time{}}, nil
}

// Run makes a pass every period until ctx ends. A failed pass is logged and the next one tries again.
func (a *Autoscaler) Run(ctx context.Context) {
	a.cfg.Logf("Monitoring RayCluster %s/%s every %s (raysim's KubeRay autoscaler)", a.cfg.Namespace, a.cfg.Cluster, a.cfg.Period)
	t := time.NewTicker(a.cfg.Period)
	defer t.Stop()
	for {
		if err := a.Pass(ctx); err != nil && ctx.Err() == nil {
			a.say("Pass failed: %v", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// say logs a line unless it repeats the previous one (a steady state is said once).
func (a *Autoscaler) say(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	if line == a.last {
		return
	}
	a.last = line
	a.cfg.Logf("%s", line)
}

// slowPass is how long a pass may take before the autoscaler says which step took the time.
const slowPass = 5 * time.Second

// Pass reads the cluster, decides and patches the RayCluster.
func (a *Autoscaler) Pass(ctx context.Context) error {
	start, step := time.Now(), time.Now()
	var steps []string
	lap := func(what string) {
		steps = append(steps, fmt.Sprintf("%s %s", what, time.Since(step).Round(time.Millisecond)))
		step = time.Now()
	}
	defer func() {
		if took := time.Since(start); took > slowPass {
			a.say("Slow pass: %s (%s)", took.Round(time.Millisecond), strings.Join(steps, ", "))
		}
	}()
	var c rayv1.RayCluster
	if err := a.kube.Get(ctx, types.NamespacedName{Namespace: a.cfg.Namespace, Name: a.cfg.Cluster}, &c); err != nil {
		return fmt.Errorf("reading RayCluster %s/%s: %w", a.cfg.Namespace, a.cfg.Cluster, err)
	}
	lap("get RayCluster")
	var pods corev1.PodList
	if err := a.kube.List(ctx, &pods, client.InNamespace(c.Namespace),
		client.MatchingLabels{rayparams.LabelCluster: c.Name, rayparams.LabelNodeType: string(rayv1.WorkerNode)}); err != nil {
		return fmt.Errorf("listing the cluster's Pods: %w", err)
	}
	lap("list Pods")
	load, err := a.cfg.GCS.Load(ctx)
	if err != nil {
		return fmt.Errorf("reading the load from the GCS at %s: %w", a.cfg.GCS.Address, err)
	}
	lap("GCS load")
	now := time.Now()
	s := a.state(&c, pods.Items, load, now)
	d := Decide(s)

	for _, w := range d.Waiting {
		a.say("Waiting for the Pods of %s in workersToDelete to go before scaling it", w)
	}
	for _, dem := range d.Infeasible {
		a.say("No worker group can hold the demand %s; it stays pending", dem)
	}
	for _, ch := range d.Changes {
		if err := a.patch(ctx, &c, ch); err != nil {
			return err
		}
		lap("patch " + ch.Group)
		a.last = ""
		a.say("%s: replicas %d -> %d%s", ch.Reason, ptrOr(c.Spec.WorkerGroupSpecs[ch.Index].Replicas, 0), ch.Replicas, listed(ch.WorkersToDelete))
		for _, p := range ch.WorkersToDelete {
			delete(a.idleSince, p)
		}
	}
	if len(d.Changes) == 0 && len(d.Waiting) == 0 && len(d.Infeasible) == 0 {
		a.say("No change: %d pending demand(s), %s", len(s.Demands), summary(s))
	}
	launching := map[string]int{}
	for g, n := range d.Launching {
		launching[g] = n
	}
	for _, ch := range d.Changes {
		if n := int(ch.Replicas) - int(ptrOr(c.Spec.WorkerGroupSpecs[ch.Index].Replicas, 0)); n > 0 {
			launching[ch.Group] += n
		}
	}
	// The report is best effort: the dashboard shows it, nothing depends on it.
	_ = a.cfg.GCS.ReportAutoscaler(ctx, gcs.AutoscalerStatus{Launching: launching, Infeasible: d.Infeasible})
	return nil
}

func listed(pods []string) string {
	if len(pods) == 0 {
		return ""
	}
	return fmt.Sprintf(", workersToDelete %v", pods)
}

func summary(s State) string {
	parts := make([]string, len(s.Groups))
	for i, g := range s.Groups {
		parts[i] = fmt.Sprintf("%s %d/[%d,%d]", g.Name, g.Replicas, g.Min, g.Max)
	}
	return "groups " + strings.Join(parts, ", ")
}

func ptrOr(p *int32, def int32) int32 {
	if p == nil {
		return def
	}
	return *p
}

// state turns what was read into Decide's input and keeps the idle clocks.
func (a *Autoscaler) state(c *rayv1.RayCluster, pods []corev1.Pod, load gcs.Load, now time.Time) State {
	s := State{Demands: load.PendingDemands, IdleSince: a.idleSince, Now: now, IdleTimeout: DefaultIdleTimeout, Mode: ModeDefault}
	if o := c.Spec.AutoscalerOptions; o != nil {
		if o.IdleTimeoutSeconds != nil {
			s.IdleTimeout = time.Duration(*o.IdleTimeoutSeconds) * time.Second
		}
		if o.UpscalingMode != nil {
			s.Mode = string(*o.UpscalingMode)
		}
	}
	podsOf := map[string][]string{}
	for _, p := range pods {
		if p.DeletionTimestamp.IsZero() {
			podsOf[p.Labels[rayparams.LabelGroup]] = append(podsOf[p.Labels[rayparams.LabelGroup]], p.Name)
		}
	}
	for _, g := range c.Spec.WorkerGroupSpecs {
		lo, hi := ptrOr(g.MinReplicas, 0), ptrOr(g.MaxReplicas, math.MaxInt32)
		s.Groups = append(s.Groups, Group{Name: g.GroupName, Min: lo, Max: hi, Replicas: max(min(ptrOr(g.Replicas, lo), hi), lo),
			Shape: Shape(&g), Pods: podsOf[g.GroupName], WorkersToDelete: g.ScaleStrategy.WorkersToDelete})
	}
	seen := map[string]bool{}
	for _, n := range load.Nodes {
		if n.State != gcs.StateAlive {
			continue
		}
		node := Node{Pod: n.InstanceID, Available: n.Available, Idle: n.RunningJobs == 0}
		if node.Pod == "" {
			node.Pod = n.Hostname
		}
		if !n.IsHead {
			node.Group = n.NodeTypeName
		}
		if node.Available == nil {
			node.Available = n.Total
		}
		s.Nodes = append(s.Nodes, node)
		if n.IsHead {
			continue
		}
		seen[node.Pod] = true
		if !node.Idle {
			delete(a.idleSince, node.Pod)
		} else if _, ok := a.idleSince[node.Pod]; !ok {
			a.idleSince[node.Pod] = now
		}
	}
	for p := range a.idleSince {
		if !seen[p] {
			delete(a.idleSince, p)
		}
	}
	return s
}

// Shape is one worker's Ray resources as `ray start` declares them for group g: the group's top-level
// resources, then rayStartParams num-cpus, num-gpus, memory and resources, else the Ray container's
// limits (CPU and GPU also from requests), as KubeRay builds the command and Ray's autoscaler reads it.
func Shape(g *rayv1.WorkerGroupSpec) rayres.Set {
	out := rayres.Set{}
	var ray corev1.Container
	if len(g.Template.Spec.Containers) > 0 {
		ray = g.Template.Spec.Containers[0]
	}
	quantity := func(name corev1.ResourceName) (resource.Quantity, bool) {
		if q, ok := ray.Resources.Limits[name]; ok && !q.IsZero() {
			return q, true
		}
		q, ok := ray.Resources.Requests[name]
		return q, ok && !q.IsZero()
	}
	if q, ok := quantity(corev1.ResourceCPU); ok {
		out[rayres.CPU] = float64(q.Value())
	}
	if q, ok := ray.Resources.Limits[corev1.ResourceMemory]; ok {
		out[rayres.Memory] = float64(q.Value())
	}
	for name, q := range ray.Resources.Limits {
		if rayparams.IsGPU(string(name)) && !q.IsZero() {
			out[rayres.GPU] = float64(q.Value())
		}
	}
	params := maps.Clone(g.RayStartParams)
	if params == nil {
		params = map[string]string{}
	}
	rayparams.ApplyGroupResources(params, g.Resources)
	for param, res := range map[string]string{"num-cpus": rayres.CPU, "num-gpus": rayres.GPU, "memory": rayres.Memory} {
		if v, ok := params[param]; ok {
			if f, err := strconv.ParseFloat(strings.Trim(v, `'" `), 64); err == nil {
				out[res] = f
			}
		}
	}
	if v, ok := params["resources"]; ok {
		custom := map[string]float64{}
		raw := strings.ReplaceAll(strings.Trim(v, `'" `), `\"`, `"`)
		if json.Unmarshal([]byte(raw), &custom) == nil {
			for k, f := range custom {
				out[k] = f
			}
		}
	}
	return out
}

// patch writes one Change as a JSON patch of the group's replicas and workersToDelete, guarded by a
// test that the index still names the group.
func (a *Autoscaler) patch(ctx context.Context, c *rayv1.RayCluster, ch Change) error {
	base := fmt.Sprintf("/spec/workerGroupSpecs/%d", ch.Index)
	toDelete := ch.WorkersToDelete
	if toDelete == nil {
		toDelete = []string{}
	}
	ops := []map[string]any{
		{"op": "test", "path": base + "/groupName", "value": ch.Group},
		{"op": "add", "path": base + "/replicas", "value": ch.Replicas},
		{"op": "add", "path": base + "/scaleStrategy", "value": map[string]any{"workersToDelete": toDelete}},
	}
	body, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	if err := a.kube.Patch(ctx, c.DeepCopy(), client.RawPatch(types.JSONPatchType, body)); err != nil {
		return fmt.Errorf("patching RayCluster %s/%s group %s: %w", c.Namespace, c.Name, ch.Group, err)
	}
	return nil
}
