// Package fieldwarnings reports the ray.io/v1 fields rayctl's controllers accept but do not act on.
// The CRDs accept every field KubeRay v1.7 defines, so that KubeRay's manifests apply unchanged; where
// rayctl does nothing with one, the object gets a Warning event (reason UnsupportedField) naming the
// field and what is not done, once per generation that sets it, rather than silence.
//
// It reads RayClusters, RayJobs and RayServices as unstructured objects: rayctl's Go types are KubeRay v1.6.2's and
// lack v1.7's fields, which a typed read would drop unseen.
package fieldwarnings

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"

	"github.com/rayctl/rayctl/pkg/controllers/ctrlset"
)

// Name is the controller's name, in logs and --controllers.
const Name = "fieldwarnings"

// EventUnsupportedField is the reason of the Warning events.
const EventUnsupportedField = "UnsupportedField"

// Field is a field rayctl does not act on: its path inside a cluster spec ("[]" steps into every
// item of a list), the value it is unsupported with (or any value), and what goes undone.
type Field struct {
	// Path is the field's path, e.g. "workerGroupSpecs[].priority".
	Path string
	// Value, when set, limits the field to that value (as fmt prints it: "true" for a boolean): other
	// values are acted on.
	Value string
	// Undone says what rayctl does not do for it.
	Undone string
}

// String is the field as events name it: its path, and its value where only one value is unsupported.
func (f Field) String() string {
	if f.Value == "" {
		return f.Path
	}
	return f.Path + ": " + f.Value
}

// ClusterSpecFields are the fields of a RayCluster spec (KubeRay v1.6 and v1.7 additions) that rayctl
// accepts and does not act on.
var ClusterSpecFields = []Field{
	{Path: "tlsOptions", Undone: "TLS between Ray's components is not set up"},
	{Path: "historyServerOptions", Undone: "no history server collector is added"},
	// The redis backend (the default) is acted on: the head gets its Redis.
	{Path: "gcsFaultToleranceOptions.backend", Value: "rocksdb", Undone: "GCS fault tolerance with RocksDB is not configured (only with Redis)"},
	{Path: "gcsFaultToleranceOptions.storage", Undone: "no GCS storage claim is made"},
	{Path: "headGroupSpec.ingressOptions", Undone: "no Ingress is made for the head"},
	{Path: "workerGroupSpecs[].priority", Undone: "worker groups are not ordered by priority"},
	{Path: "autoscalerOptions.command", Undone: "the autoscaler container's command is not changed"},
	{Path: "autoscalerOptions.args", Undone: "the autoscaler container's args are not changed"},
}

// RayServiceFields are the fields of a RayService spec that rayctl accepts and does not act on.
var RayServiceFields = []Field{
	{Path: "upgradeStrategy.type", Value: "NewClusterWithIncrementalUpgrade", Undone: "incremental upgrades need the Gateway API, which this rayctl does not serve (rayctl up --gateway-api); a change of spec.rayClusterConfig is not rolled out (as KubeRay without its incremental-upgrade feature gate)"},
	{Path: "upgradeStrategy.clusterUpgradeOptions", Undone: "no incremental upgrade is done without the Gateway API (rayctl up --gateway-api)"},
	{Path: "suspend", Undone: "the RayService is not suspended"},
}

// RayJobFields are the fields of a RayJob spec that rayctl accepts and does not act on.
// (None today: rayClusterSpec's own fields are checked as a RayCluster's, and its networkPolicy is carried
// to the RayJob's cluster, where it is acted on.)
var RayJobFields = []Field{}

// kinds are the watched kinds, where each keeps a cluster spec, and the fields of its own spec
// rayctl does not act on.
var kinds = []struct {
	kind   string
	prefix []string
	own    []Field
}{
	{"RayCluster", []string{"spec"}, nil},
	{"RayJob", []string{"spec", "rayClusterSpec"}, RayJobFields},
	{"RayService", []string{"spec", "rayClusterConfig"}, RayServiceFields},
}

// Present returns the fields that are set (not null) in spec, in the order of fields.
func Present(spec map[string]any, fields []Field) []Field {
	var out []Field
	for _, f := range fields {
		if set(spec, strings.Split(f.Path, "."), f.Value) {
			out = append(out, f)
		}
	}
	return out
}

// set says whether the field at steps below v is set (to value, unless value is "").
func set(v any, steps []string, value string) bool {
	if len(steps) == 0 {
		return v != nil && (value == "" || fmt.Sprint(v) == value)
	}
	step := steps[0]
	list := strings.HasSuffix(step, "[]")
	m, ok := v.(map[string]any)
	if !ok {
		return false
	}
	child, ok := m[strings.TrimSuffix(step, "[]")]
	if !ok {
		return false
	}
	if !list {
		return set(child, steps[1:], value)
	}
	items, _ := child.([]any)
	for _, item := range items {
		if set(item, steps[1:], value) {
			return true
		}
	}
	return false
}

// reconciler reports the unsupported fields of one kind.
type reconciler struct {
	client   client.Client
	recorder record.EventRecorder
	gvk      schema.GroupVersionKind
	prefix   []string
	own      []Field
	// reported holds, per object key, the UID and generation last reported.
	reported sync.Map
}

// Setup registers one controller per watched kind (RayCluster, RayJob, RayService) with mgr.
// Where the Gateway API is served, a RayService's incremental upgrade is acted on and gets no Warning.
func Setup(mgr ctrl.Manager, env ctrlset.Env) error {
	_, err := mgr.GetRESTMapper().RESTMapping(schema.GroupKind{Group: "gateway.networking.k8s.io", Kind: "HTTPRoute"}, "v1")
	gatewayAPI := err == nil
	for _, k := range kinds {
		own := k.own
		if k.kind == "RayService" && gatewayAPI {
			own = slices.DeleteFunc(slices.Clone(own), func(f Field) bool { return strings.HasPrefix(f.Path, "upgradeStrategy.") })
		}
		r := &reconciler{client: mgr.GetClient(), recorder: env.Recorder, gvk: rayv1.GroupVersion.WithKind(k.kind), prefix: k.prefix, own: own}
		if err := env.Hooks.Sub(strings.ToLower(k.kind)).NewControllerManagedBy(mgr).
			For(r.empty()).
			Complete(r); err != nil {
			return err
		}
	}
	return nil
}

func (r *reconciler) empty() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(r.gvk)
	return u
}

// Reconcile reports the unsupported fields a new generation of the object sets.
func (r *reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj := r.empty()
	if err := r.client.Get(ctx, req.NamespacedName, obj); err != nil {
		if client.IgnoreNotFound(err) == nil {
			r.reported.Delete(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	seen := version{obj.GetUID(), obj.GetGeneration()}
	if v, ok := r.reported.Load(req.NamespacedName); ok && v.(version) == seen {
		return ctrl.Result{}, nil
	}
	r.reported.Store(req.NamespacedName, seen)
	spec, _, _ := unstructured.NestedMap(obj.Object, r.prefix...)
	where := strings.Join(r.prefix, ".")
	for _, f := range Present(spec, ClusterSpecFields) {
		r.recorder.Eventf(obj, corev1.EventTypeWarning, EventUnsupportedField,
			"%s.%s is accepted but rayctl does not act on it: %s", where, f, f.Undone)
	}
	ownSpec, _, _ := unstructured.NestedMap(obj.Object, "spec")
	for _, f := range Present(ownSpec, r.own) {
		r.recorder.Eventf(obj, corev1.EventTypeWarning, EventUnsupportedField,
			"spec.%s is accepted but rayctl does not act on it: %s", f, f.Undone)
	}
	return ctrl.Result{}, nil
}

// version identifies one generation of one object.
type version struct {
	uid        types.UID
	generation int64
}
